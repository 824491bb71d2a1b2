"""Telegram's two formatting modes, parsed as its Bot API documents them, to check that what
chatfn/channels/markdown.py writes is accepted: https://core.telegram.org/bots/api#formatting-options
(MarkdownV2 style, HTML style). A parse error here is a message Telegram would refuse with
"can't parse entities"."""

from __future__ import annotations

import re
from html.parser import HTMLParser

RESERVED = set("_*[]()~`>#+-=|{}.!")
HTML_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
}  # fmt: skip


class MarkupError(ValueError):
    pass


def parse_markdown_v2(s: str, kinds: set[str] | None = None, links: list[str] | None = None) -> str:
    """The plain text of a MarkdownV2 message; MarkupError where Telegram would refuse it.
    `kinds` collects the entity types shown ("bold", "italic", "code", "pre", "link", ...),
    `links` the URLs of the links (tests/channels/telegram/telegram_fake.py reports them)."""
    kinds = set() if kinds is None else kinds
    links = [] if links is None else links
    out: list[str] = []
    stack: list[str] = []
    i = 0
    line_start = True

    def toggle(kind: str) -> None:
        if stack and stack[-1] == kind:
            stack.pop()
        elif kind in stack:
            raise MarkupError(f"{kind} closed across another entity at {i}")
        else:
            stack.append(kind)
            kinds.add(kind)

    while i < len(s):
        c = s[i]
        at_line_start, line_start = line_start, False
        if c == "\\":
            if i + 1 >= len(s) or not 1 <= ord(s[i + 1]) <= 126:
                raise MarkupError(f"a backslash escapes nothing at {i}")
            out.append(s[i + 1])
            i += 2
        elif c == "`":
            kinds.add("pre" if s.startswith("```", i) else "code")
            i = _code(s, i, out)
        elif c == "*":
            toggle("bold")
            i += 1
        elif c == "_":
            if s.startswith("__", i):
                toggle("underline")
                i += 2
            else:
                toggle("italic")
                i += 1
        elif c == "~":
            toggle("strike")
            i += 1
        elif c == "|" and s.startswith("||", i):
            toggle("spoiler")
            i += 2
        elif c == "[":
            stack.append("link")
            i += 1
        elif c == "]" and stack and stack[-1] == "link":
            stack.pop()
            if not s.startswith("(", i + 1):
                raise MarkupError(f"a link label without (url) at {i}")
            end = _url(s, i + 2)
            kinds.add("link")
            links.append(re.sub(r"\\(.)", r"\1", s[i + 2 : end - 1]))
            i = end
        elif c == ">" and at_line_start:
            i += 1
        elif c in RESERVED:
            raise MarkupError(f"character {c!r} is reserved and must be escaped (at {i})")
        else:
            out.append(c)
            line_start = c == "\n"
            i += 1
    if stack:
        raise MarkupError(f"unclosed {stack}")
    return "".join(out)


def _code(s: str, i: int, out: list[str]) -> int:
    """Inline code or a pre block: inside, only ` and \\ are (and must be) escaped."""
    fence = "```" if s.startswith("```", i) else "`"
    j = i + len(fence)
    if fence == "```":  # an optional language up to the first newline
        end = s.find("\n", j)
        close = s.find("```", j)
        if end != -1 and (close == -1 or end < close):
            j = end + 1
    while j < len(s):
        if s[j] == "\\":
            if j + 1 >= len(s) or s[j + 1] not in "`\\":
                if j + 1 < len(s) and 1 <= ord(s[j + 1]) <= 126:
                    out.append(s[j + 1])
                    j += 2
                    continue
                raise MarkupError(f"a bad escape in code at {j}")
            out.append(s[j + 1])
            j += 2
        elif s.startswith(fence, j):
            if fence == "```" and out and out[-1] == "\n":
                out.pop()  # the newline before a closing fence on its own line
            return j + len(fence)
        elif s[j] == "`":
            raise MarkupError(f"an unescaped ` inside code at {j}")
        else:
            out.append(s[j])
            j += 1
    raise MarkupError("unclosed code")


def _url(s: str, j: int) -> int:
    while j < len(s):
        if s[j] == "\\":
            j += 2
        elif s[j] == ")":
            return j + 1
        else:
            j += 1
    raise MarkupError("unclosed link url")


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            raise MarkupError(f"unsupported tag <{tag}>")
        if (
            self.stack
            and self.stack[-1] in ("code", "pre")
            and not (self.stack[-1] == "pre" and tag == "code")
        ):
            raise MarkupError(f"<{tag}> inside <{self.stack[-1]}>")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            raise MarkupError(f"</{tag}> does not close {self.stack}")
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_telegram_html(s: str) -> str:
    """The plain text of an HTML-style message; MarkupError where Telegram would refuse it
    (a tag it does not know, one left open or closed out of order, a bare `<` or `&`)."""
    for k, ch in enumerate(s):
        if ch == "<" and not (s[k + 1 : k + 2].isalpha() or s[k + 1 : k + 2] == "/"):
            raise MarkupError(f"a bare < at {k}")
        if ch == "&" and not any(s.startswith(e, k) for e in ("&lt;", "&gt;", "&amp;", "&quot;")):
            raise MarkupError(f"a bare & at {k}")
    parser = _Html()
    parser.feed(s)
    parser.close()
    if parser.stack:
        raise MarkupError(f"unclosed {parser.stack}")
    return "".join(parser.text)
