"""The model's Markdown in each platform's own format, with the platform's escaping.

Models answer in CommonMark-ish Markdown. Each platform formats differently, and some reject a
message whose markup does not parse (Telegram's MarkdownV2 refuses `1.5` or `(see below)` with
an unescaped `.` or `(`). The text is parsed once (markdown-it-py, CommonMark plus
strikethrough and tables) and rendered per platform, so bold, italics, code and links arrive
as the platform's formatting and everything else is escaped:

    to_telegram_markdown_v2(text)   Telegram `parse_mode=MarkdownV2`
    to_telegram_html(text)          Telegram `parse_mode=HTML`
    to_slack_mrkdwn(text)           Slack `mrkdwn`
    to_discord(text)                Discord message content
    to_matrix_html(text)            Matrix `formatted_body` (format org.matrix.custom.html)
    to_kmarkdown(text)              KOOK `type: 9` messages (KMarkdown)
    to_plain(text)                  any platform without formatting (and Matrix's `body`)

Raw HTML the model writes is text, never markup (markdown-it's `html` option is off). What a
platform cannot show (headings, tables on Telegram) becomes the closest it can: a heading in
bold, a table as an aligned monospaced block, a list as bullet lines.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = [
    "to_discord",
    "to_kmarkdown",
    "to_matrix_html",
    "to_plain",
    "to_slack_mrkdwn",
    "to_telegram_html",
    "to_telegram_markdown_v2",
]


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    """CommonMark with ~~strikethrough~~ and tables; raw HTML stays text."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])


class Style:
    """How one platform writes each piece; the defaults write plain text."""

    strong = ("", "")
    em = ("", "")
    strike = ("", "")
    bullet = "•"
    quote_prefix = ""

    def text(self, s: str) -> str:
        return s

    def code(self, s: str) -> str:
        return s

    def pre(self, s: str, lang: str) -> str:
        return s

    def link(self, label: str, url: str) -> str:
        return label if label in (url, self.text(url)) else f"{label} ({self.text(url)})"

    def number(self, n: int) -> str:
        return self.text(f"{n}.")

    def heading(self, inner: str, level: int) -> str:
        return f"{self.strong[0]}{inner}{self.strong[1]}" if inner else inner

    def quote(self, inner: str) -> str:
        return "\n".join(f"{self.quote_prefix}{line}" for line in inner.split("\n"))

    def rule(self) -> str:
        return self.text("———")

    def in_list(self, line: str) -> str:
        """A line of a list item as it is written after the marker or indentation."""
        return line

    def separator(self, previous: str, delimiter: str) -> str:
        """Written between two delimiters that would otherwise merge (MarkdownV2's `__`)."""
        return ""


class TelegramV2(Style):
    """https://core.telegram.org/bots/api#markdownv2-style"""

    strong = ("*", "*")
    em = ("_", "_")
    strike = ("~", "~")
    quote_prefix = ">"
    _SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")

    def text(self, s: str) -> str:
        return self._SPECIAL.sub(r"\\\1", s)

    def code(self, s: str) -> str:
        return "`" + re.sub(r"([`\\])", r"\\\1", s) + "`"

    def pre(self, s: str, lang: str) -> str:
        body = re.sub(r"([`\\])", r"\\\1", s)
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
        return f"```{lang}\n{body}\n```"

    def link(self, label: str, url: str) -> str:
        # Telegram refuses a text link whose URL is not absolute ("wrong HTTP URL"), and an
        # empty label shows nothing: those stay text.
        if not re.match(r"(?i)(https?://|tg://|mailto:)\S", url):
            if not url:
                return label or self.text("[]()")
            shown = self.text(url)
            return label if label in (url, shown) else f"{label} " + self.text(f"({url})")
        return f"[{label or self.text(url)}](" + re.sub(r"([)\\])", r"\\\1", url) + ")"

    def quote(self, inner: str) -> str:
        # Every line of a blockquote starts with `>`, blank ones too (one entity); Telegram
        # has no nested quotes, so a quote in a quote is the same quote.
        return "\n".join(line if line.startswith(">") else f">{line}" for line in inner.split("\n"))

    def in_list(self, line: str) -> str:
        # A quote is a quote only at the start of a line: inside a list item it is plain.
        return line[1:] if line.startswith(">") else line

    def separator(self, previous: str, delimiter: str) -> str:
        # `__` is underline: two italic delimiters in a row get an empty bold entity between.
        return "**" if previous.endswith("_") and delimiter.startswith("_") else ""


class TelegramHtml(Style):
    """https://core.telegram.org/bots/api#html-style"""

    strong = ("<b>", "</b>")
    em = ("<i>", "</i>")
    strike = ("<s>", "</s>")

    def text(self, s: str) -> str:
        return html.escape(s, quote=False)

    def code(self, s: str) -> str:
        return f"<code>{html.escape(s, quote=False)}</code>"

    def pre(self, s: str, lang: str) -> str:
        body = html.escape(s, quote=False)
        if lang:
            lang = html.escape(lang, quote=True)
            return f'<pre><code class="language-{lang}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def link(self, label: str, url: str) -> str:
        return f'<a href="{html.escape(url, quote=True)}">{label or self.text(url)}</a>'

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>"


class SlackMrkdwn(Style):
    """https://api.slack.com/reference/surfaces/formatting: only `&`, `<` and `>` are escaped
    (mrkdwn has no backslash escape; `*a*` needs word boundaries to format)."""

    strong = ("*", "*")
    em = ("_", "_")
    strike = ("~", "~")
    quote_prefix = "> "

    def text(self, s: str) -> str:
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def code(self, s: str) -> str:
        return "`" + self.text(s).replace("`", "'") + "`"

    def pre(self, s: str, lang: str) -> str:
        return "```\n" + self.text(s).replace("```", "'''") + "\n```"

    def link(self, label: str, url: str) -> str:
        safe = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
        return f"<{safe}|{label}>" if label else f"<{safe}>"


class Discord(Style):
    """Discord's Markdown: backslash escapes any markdown punctuation."""

    strong = ("**", "**")
    em = ("*", "*")
    strike = ("~~", "~~")
    quote_prefix = "> "
    _SPECIAL = re.compile(r"([\\*_~`|\[\]<>])")
    _LINE_START = re.compile(r"(?m)^(\s*)([#>\-+]|\d+\.)")

    def text(self, s: str) -> str:
        s = self._SPECIAL.sub(r"\\\1", s)
        return self._LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), s)

    def code(self, s: str) -> str:
        fence = "``" if "`" in s else "`"
        pad = " " if s.startswith("`") or s.endswith("`") else ""
        return f"{fence}{pad}{s}{pad}{fence}"

    def pre(self, s: str, lang: str) -> str:
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
        return f"```{lang}\n" + s.replace("```", "`\u200b``") + "\n```"

    def link(self, label: str, url: str) -> str:
        return f"[{label}](<{url}>)" if label and label != self.text(url) else f"<{url}>"

    def heading(self, inner: str, level: int) -> str:
        return f"{'#' * min(level, 3)} {inner}" if inner else inner


class KMarkdown(Style):
    """KOOK's KMarkdown (https://developer.kookapp.cn/doc/kmarkdown): Markdown's bold,
    `*italics*`, `~~strike~~`, code, http(s) links and `>` quotes (to the next blank line),
    plus KOOK's own `(tag)value(tag)` forms (`(met)id(met)` mentions, `(spl)`, `(ins)`), so a
    backslash escapes every character of those and `-` / `>` at a line's start (`---` is a
    rule). No headings or lists: a heading is bold, a list is bullet lines."""

    strong = ("**", "**")
    em = ("*", "*")
    strike = ("~~", "~~")
    quote_prefix = "> "
    _SPECIAL = re.compile(r"([\\*~`\[\]()>_])")
    _LINE_START = re.compile(r"(?m)^(\s*)-")

    def text(self, s: str) -> str:
        s = self._SPECIAL.sub(r"\\\1", s)
        return self._LINE_START.sub(lambda m: m.group(1) + "\\-", s)

    def code(self, s: str) -> str:
        return "`" + s.replace("`", "\u02cb") + "`"

    def rule(self) -> str:
        return "---"

    def pre(self, s: str, lang: str) -> str:
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
        return f"```{lang}\n" + s.replace("```", "`\u200b``") + "\n```"

    def link(self, label: str, url: str) -> str:
        if not re.match(r"(?i)https?://\S+$", url):  # KOOK links only http(s)
            return super().link(label, url)
        safe = url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        return f"[{label or self.text(url)}]({safe})"

    def quote(self, inner: str) -> str:
        # A quote runs to the next blank line: its own blank lines would end it.
        return "> " + re.sub(r"\n{2,}", "\n", inner)


class _Renderer:
    def __init__(self, style: Style) -> None:
        self.style = style

    def render(self, text: str) -> str:
        blocks, _ = self._blocks(parser().parse(text), 0, None)
        return "\n\n".join(b for b in blocks if b != "").strip("\n")

    def _blocks(self, toks: Sequence[Token], i: int, stop: str | None) -> tuple[list[str], int]:
        style = self.style
        out: list[str] = []
        while i < len(toks):
            t = toks[i]
            kind = t.type
            if kind == stop:
                return out, i + 1
            if kind == "paragraph_open":
                out.append(self.inline(toks[i + 1]))
                i += 3
            elif kind == "heading_open":
                out.append(style.heading(self.inline(toks[i + 1]), int(t.tag[1:] or 1)))
                i += 3
            elif kind in ("fence", "code_block"):
                lang = t.info.strip().split(" ")[0] if t.info.strip() else ""
                if t.content.strip("\n"):  # an empty block is nothing to show (or refused)
                    out.append(style.pre(t.content.rstrip("\n"), lang))
                i += 1
            elif kind == "blockquote_open":
                inner, i = self._blocks(toks, i + 1, "blockquote_close")
                quoted = "\n\n".join(b for b in inner if b)
                if quoted:  # an empty quote shows nothing (and would be an empty entity)
                    out.append(style.quote(quoted))
            elif kind in ("bullet_list_open", "ordered_list_open"):
                block, i = self._list(toks, i)
                out.append(block)
            elif kind == "table_open":
                block, i = self._table(toks, i)
                out.append(block)
            elif kind == "hr":
                out.append(style.rule())
                i += 1
            elif kind == "html_block":  # not produced with html off; kept as text if it is
                out.append(style.text(t.content.rstrip("\n")))
                i += 1
            else:
                i += 1
        return out, i

    def _list(self, toks: Sequence[Token], i: int) -> tuple[str, int]:
        opener = toks[i]
        ordered = opener.type == "ordered_list_open"
        close = opener.type.replace("_open", "_close")
        n = int(opener.attrGet("start") or 1) if ordered else 1
        items: list[str] = []
        i += 1
        while i < len(toks) and toks[i].type != close:
            if toks[i].type != "list_item_open":
                i += 1
                continue
            inner, i = self._blocks(toks, i + 1, "list_item_close")
            marker = self.style.number(n) if ordered else self.style.bullet
            body = "\n".join(inner)
            pad = " " * (len(marker) + 1)
            lines = [self.style.in_list(line) for line in body.split("\n")]
            items.append(f"{marker} {lines[0]}" + "".join(f"\n{pad}{ln}" for ln in lines[1:]))
            n += 1
        return "\n".join(items), i + 1

    def _table(self, toks: Sequence[Token], i: int) -> tuple[str, int]:
        """A table as aligned monospaced rows: no chat platform here draws Markdown tables."""
        rows: list[list[str]] = []
        while i < len(toks) and toks[i].type != "table_close":
            t = toks[i]
            if t.type == "tr_open":
                rows.append([])
            elif t.type == "inline":
                rows[-1].append(_Renderer(Style()).inline(t))
            i += 1
        widths = [max(len(r[c]) if c < len(r) else 0 for r in rows) for c in range(len(rows[0]))]
        lines = [
            " | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) for r in rows
        ]
        if len(lines) > 1:
            lines.insert(1, "-+-".join("-" * w for w in widths))
        return self.style.pre("\n".join(line.rstrip() for line in lines), ""), i + 1

    def inline(self, token: Token) -> str:
        style = self.style
        out: list[str] = []
        links: list[tuple[int, str]] = []  # (index in out where the label starts, href)

        def put(delimiter: str) -> None:
            previous = out[-1] if out else ""
            out.append(style.separator(previous, delimiter) + delimiter)

        for child in token.children or []:
            kind = child.type
            if kind == "text":
                out.append(style.text(child.content))
            elif kind in ("softbreak", "hardbreak"):
                out.append("\n")
            elif kind == "code_inline":
                out.append(style.code(child.content) if not links else style.text(child.content))
            elif kind in _DELIMITERS:
                attribute, side = _DELIMITERS[kind]
                put(getattr(style, attribute)[side])
            elif kind == "link_open":
                links.append((len(out), str(child.attrGet("href") or "")))
            elif kind == "link_close" and links:
                start, href = links.pop()
                label = "".join(out[start:])
                del out[start:]
                out.append(style.link(label, href))
            elif kind == "image":
                src = str(child.attrGet("src") or "")
                out.append(style.link(style.text(child.content or src), src))
            elif kind == "html_inline":
                out.append(style.text(child.content))
        return "".join(out)


#: Emphasis tokens: the Style attribute holding the (open, close) pair, and which side.
_DELIMITERS = {
    "strong_open": ("strong", 0),
    "strong_close": ("strong", 1),
    "em_open": ("em", 0),
    "em_close": ("em", 1),
    "s_open": ("strike", 0),
    "s_close": ("strike", 1),
}


def to_plain(text: str) -> str:
    """No markup: emphasis dropped, links as `label (url)`, code as it is."""
    return _Renderer(Style()).render(text)


def to_telegram_markdown_v2(text: str) -> str:
    return _Renderer(TelegramV2()).render(text)


def to_telegram_html(text: str) -> str:
    return _Renderer(TelegramHtml()).render(text)


def to_slack_mrkdwn(text: str) -> str:
    return _Renderer(SlackMrkdwn()).render(text)


def to_discord(text: str) -> str:
    return _Renderer(Discord()).render(text)


def to_matrix_html(text: str) -> str:
    """HTML for Matrix's `formatted_body` (markdown-it's own renderer; raw HTML escaped)."""
    return parser().render(text).strip("\n")


def to_kmarkdown(text: str) -> str:
    """KOOK's KMarkdown (`type: 9` messages)."""
    return _Renderer(KMarkdown()).render(text)
