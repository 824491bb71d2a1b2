"""Documents in, sections out: text, Markdown, HTML and PDF read into (heading, text) pairs.

A section's heading is what a citation names (`faq.md § Refunds`), so each reader keeps the
document's own structure: Markdown and HTML headings (nested: `Install › Linux`), PDF pages.
Nothing here touches the network or the database; bytes go in, sections come out.
"""

from __future__ import annotations

import io
import re
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath

from loguru import logger

from function_calls import ConfigError

# Suffixes read from folders (a file named explicitly is read whatever its suffix, as text).
SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")
_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^(```|~~~)")
# Bounds of reading one PDF (see `_pdf`): the pages read, the bytes of content streams
# interpreted per byte of text allowed (a text page draws a byte of text with about one
# byte of operators), and the CPU seconds spent (pypdf interprets 0.15-0.5 MB of content a
# second on this project's machine: bench/README.md).
PDF_MAX_PAGES = 5000
PDF_CONTENT_PER_TEXT = 2
PDF_CPU_SECONDS = 20.0


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


def read(data: bytes, kind: str, max_bytes: int, name: str = "a PDF") -> list[Section]:
    """The sections of a document of `kind` (see `kind_of`). `max_bytes` (the base's
    `max_source_bytes`) bounds the text a PDF is read into; the other kinds' text is never
    longer than their bytes, which were bounded before. `name`: the source, for log lines."""
    if kind == "pdf":
        return _pdf(data, max_bytes, name)
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


def _pdf(data: bytes, max_bytes: int, name: str) -> list[Section]:
    """A PDF's pages as sections, read within bounds: a few kilobytes of PDF can draw
    megabytes of text (every page pointing at one compressed content stream that draws 5 MB),
    and pypdf takes seconds of CPU per megabyte of content it interprets. So pages are read in
    order until the text reaches `max_bytes` (the last page cut there), after `PDF_MAX_PAGES`
    pages or after `PDF_CPU_SECONDS` of this thread's CPU time (it runs in a worker thread);
    a page whose content would take what was interpreted past `PDF_CONTENT_PER_TEXT` times
    `max_bytes` is left out. What was read is kept; a log line says what was not."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise ConfigError(
            'knowledge: a PDF source needs pypdf: pip install "chatfn[knowledge]"'
        ) from None
    sections: list[Section] = []
    text_left = max_bytes
    content_left = max_bytes * PDF_CONTENT_PER_TEXT
    began = time.thread_time()
    heavy = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        for number, page in enumerate(reader.pages, 1):
            stop = _pdf_stop(number, text_left, time.thread_time() - began)
            if stop:
                logger.warning("knowledge: {}: pages from {} on left out: {}", name, number, stop)
                break
            contents = page.get_contents()  # decoded once: pypdf keeps a stream's data
            size = len(contents.get_data()) if contents is not None else 0
            if size > content_left:
                heavy += 1
                continue
            content_left -= size
            text = (page.extract_text() or "").strip()
            encoded = text.encode()
            if len(encoded) > text_left:
                text = encoded[:text_left].decode(errors="ignore")
            text_left -= len(encoded)
            if text:
                sections.append(Section(f"page {number}", text))
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableDocument(f"not a readable PDF: {exc}") from None
    if heavy:
        logger.warning(
            "knowledge: {}: {} pages left out: each draws more content than was left to "
            "interpret within max_source_bytes",
            name,
            heavy,
        )
    return sections


def _pdf_stop(number: int, text_left: int, cpu: float) -> str:
    """Why reading stops before page `number` ("": it does not)."""
    if text_left <= 0:
        return "the text read reached max_source_bytes"
    if number > PDF_MAX_PAGES:
        return f"more than {PDF_MAX_PAGES} pages"
    if cpu > PDF_CPU_SECONDS:
        return f"reading took {cpu:.1f} s of CPU already"
    return ""
