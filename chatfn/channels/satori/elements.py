"""Satori's message elements (https://satori.chat/en-US/protocol/elements.html): a message's
`content` is XML-like text; `&`, `<`, `>` and `"` are written `&amp;`, `&lt;`, `&gt;` and
`&quot;` (in text and in attribute values). What the channel reads and writes of it:

- in: text; `<at id="..." name="..."/>` (the bot's own id: the message is for the bot, cut
  from the text; another user's: `@name`; `type="all"`: `@all`); `<sharp id name/>` as
  `#name`; `<img src/>` (also `<image url/>` of older servers) an image; `<quote id>...</quote>`
  the message replied to (its id, and its inner text as the quoted text); `<br/>` and `<p>` as
  line breaks; any other element's inner text as text.
- out: the model's Markdown as Satori's formatting elements (`<b>`, `<i>`, `<s>`, `<code>`,
  `<a href>`), everything else escaped; `<at id/>`, `<quote id/>` and `<img src/>`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from chatfn.channels.markdown import Style, _Renderer  # the shared parse, one renderer each

__all__ = [
    "Parsed",
    "at",
    "audio",
    "escape",
    "img",
    "parse",
    "quote",
    "to_satori",
    "unescape",
]

_TAG = re.compile(
    r"<(/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'>/]+))?)*)\s*(/?)>"
)
_ATTR = re.compile(r"([\w:-]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>/]+)))?")
_BLOCK = frozenset({"p", "message"})


def escape(text: str, attr: bool = False) -> str:
    """`text` as Satori element text (`attr`: an attribute value, `"` escaped too)."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return out.replace('"', "&quot;") if attr else out


def unescape(text: str) -> str:
    return html.unescape(text)


def at(user_id: str) -> str:
    return f'<at id="{escape(user_id, True)}"/>'


def quote(message_id: str) -> str:
    return f'<quote id="{escape(message_id, True)}"/>'


def img(src: str) -> str:
    return f'<img src="{escape(src, True)}"/>'


def audio(src: str) -> str:
    return f'<audio src="{escape(src, True)}"/>'


@dataclass
class Parsed:
    text: str = ""
    at_bot: bool = False
    images: list[str] = field(default_factory=list)  # src of each <img>
    audio: list[str] = field(default_factory=list)  # src of each <audio> (a voice message)
    quote_id: str | None = None
    quoted: str | None = None


def _attrs(raw: str) -> dict[str, str]:
    got = {}
    for m in _ATTR.finditer(raw):
        value = next((v for v in m.groups()[1:] if v is not None), "")
        got[m.group(1).lower()] = unescape(value)
    return got


class _Reader:
    def __init__(self, self_id: str) -> None:
        self.self_id = self_id
        self.out = Parsed()
        self.parts: list[str] = []
        self.quoting: list[str] | None = None  # inside <quote>: its text

    def text(self, s: str) -> None:
        (self.parts if self.quoting is None else self.quoting).append(unescape(s))

    def open(self, name: str, a: dict[str, str], closed: bool) -> None:
        if name == "at":
            if a.get("id") and a["id"] == self.self_id:
                self.out.at_bot = True
            elif a.get("type") == "all":
                self.text("@all")
            else:
                self.text("@" + (a.get("name") or a.get("id") or ""))
        elif name == "sharp":
            self.text("#" + (a.get("name") or a.get("id") or ""))
        elif name in ("img", "image"):
            src = a.get("src") or a.get("url")
            if src and self.quoting is None:
                self.out.images.append(src)
        elif name in ("audio", "record"):
            src = a.get("src") or a.get("url")
            if src and self.quoting is None:
                self.out.audio.append(src)
        elif name == "br":
            self.text("\n")
        elif name == "quote" and not closed and self.quoting is None:
            self.out.quote_id = a.get("id") or None
            self.quoting = []
        elif name == "quote" and closed:
            self.out.quote_id = a.get("id") or None
        elif name in _BLOCK and self.parts and not closed:
            self.text("\n")

    def close(self, name: str) -> None:
        if name == "quote" and self.quoting is not None:
            self.out.quoted = "".join(self.quoting).strip() or None
            self.quoting = None
        elif name in _BLOCK:
            self.text("\n")


def parse(content: str, self_id: str) -> Parsed:
    """What a message's `content` says (module docstring); `self_id` is the bot's user id."""
    reader = _Reader(self_id)
    at = 0
    for m in _TAG.finditer(content):
        reader.text(content[at : m.start()])
        at = m.end()
        name = m.group(2).lower()
        if m.group(1):
            reader.close(name)
        else:
            reader.open(name, _attrs(m.group(3)), bool(m.group(4)))
    reader.text(content[at:])
    if reader.quoting is not None:  # an unclosed <quote>
        reader.close("quote")
    out = reader.out
    out.text = re.sub(r"[ \t]+\n", "\n", "".join(reader.parts)).strip()
    out.text = re.sub(r"\n{3,}", "\n\n", out.text)
    return out


class SatoriMarkup(Style):
    """Markdown as Satori's formatting elements."""

    strong = ("<b>", "</b>")
    em = ("<i>", "</i>")
    strike = ("<s>", "</s>")
    quote_prefix = "&gt; "

    def text(self, s: str) -> str:
        return escape(s)

    def code(self, s: str) -> str:
        return f"<code>{escape(s)}</code>"

    def pre(self, s: str, lang: str) -> str:
        return f"<code>{escape(s)}</code>"

    def link(self, label: str, url: str) -> str:
        return f'<a href="{escape(url, True)}">{label or escape(url)}</a>'


def to_satori(text: str) -> str:
    """The model's Markdown as Satori element text."""
    return _Renderer(SatoriMarkup()).render(text)
