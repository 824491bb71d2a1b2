"""Documents in, sections out: text, Markdown, HTML and PDF read into (heading, text) pairs.

A section's heading is what a citation names (`faq.md § Refunds`), so each reader keeps the
document's own structure: Markdown and HTML headings (nested: `Install › Linux`), PDF pages.
Nothing here touches the network or the database; bytes go in, sections come out.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath

from function_calls import ConfigError

# Suffixes read from folders (a file named explicitly is read whatever its suffix, as text).
SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")
_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^(```|~~~)")


class UnreadableDocument(ValueError):
    """A document that cannot be read (a broken PDF, a binary file): the message says which."""


@dataclass(frozen=True, slots=True)
class Section:
    heading: str  # "" before the first heading
    text: str


def kind_of(name: str, content_type: str = "") -> str:
    """ "pdf", "html", "markdown" or "text", from the content type (URLs) or the suffix."""
    ct = content_type.split(";")[0].strip().lower()
    if ct == "application/pdf":
        return "pdf"
    if ct in ("text/html", "application/xhtml+xml"):
        return "html"
    if ct in ("text/markdown", "text/x-markdown"):
        return "markdown"
    suffix = PurePosixPath(name.split("?")[0]).suffix.lower()
    return {
        ".pdf": "pdf",
        ".html": "html",
        ".htm": "html",
        ".md": "markdown",
        ".markdown": "markdown",
    }.get(suffix, "text")


def read(data: bytes, kind: str) -> list[Section]:
    """The sections of a document of `kind` (see `kind_of`)."""
    if kind == "pdf":
        return _pdf(data)
    text = _decode(data)
    if kind == "html":
        return _html(text)
    if kind == "markdown":
        return _markdown(text)
    return [Section("", text)] if text.strip() else []


def _decode(data: bytes) -> str:
    if b"\x00" in data[:4096]:
        raise UnreadableDocument("binary content, not text")
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _markdown(text: str) -> list[Section]:
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(" › ".join(h for _, h in path), body))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            in_fence = not in_fence
        m = None if in_fence else _MD_HEADING.match(line)
        if m is None:
            lines.append(line)
            continue
        flush()
        level = len(m.group(1))
        path = [(lv, h) for lv, h in path if lv < level] + [(level, m.group(2).strip())]
    flush()
    return sections


class _HtmlText(HTMLParser):
    """Text of an HTML page by heading; scripts, styles and navigation left out."""

    SKIP = frozenset({"script", "style", "nav", "noscript", "template", "svg", "head"})
    BLOCK = frozenset(
        {"p", "div", "li", "br", "tr", "section", "article", "pre", "blockquote", "dd", "dt"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.parts: list[str] = []
        self.skip = 0
        self.heading: tuple[int, list[str]] | None = None
        self.title: list[str] = []
        self.in_title = False

    def flush(self) -> None:
        body = re.sub(r"[ \t]+", " ", "".join(self.parts))
        body = re.sub(r"\n\s*\n+", "\n\n", body).strip()
        if body:
            self.sections.append(Section(" › ".join(h for _, h in self.path), body))
        self.parts.clear()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in self.SKIP:
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag) and not self.skip:
            self.flush()
            self.heading = (int(tag[1]), [])
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        elif self.heading is not None and re.fullmatch(r"h[1-6]", tag):
            level, words = self.heading
            title = " ".join("".join(words).split())
            self.path = [(lv, h) for lv, h in self.path if lv < level] + [(level, title)]
            self.heading = None
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        if self.skip:
            return
        if self.heading is not None:
            self.heading[1].append(data)
        else:
            self.parts.append(data)


def _html(text: str) -> list[Section]:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    parser.flush()
    title = " ".join("".join(parser.title).split())
    if title:  # text before the first heading is under the page's title
        return [Section(s.heading or title, s.text) for s in parser.sections]
    return parser.sections


def _pdf(data: bytes) -> list[Section]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise ConfigError(
            'knowledge: a PDF source needs pypdf: pip install "chatfn[knowledge]"'
        ) from None
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableDocument(f"not a readable PDF: {exc}") from None
    return [Section(f"page {i}", t.strip()) for i, t in enumerate(pages, 1) if t.strip()]
