"""A platform that shows plain text: the model's Markdown goes out rendered plain
(chatfn/channels/markdown.py's to_plain: emphasis dropped, links as `label (url)`, lists as
bullets), split where a reader would (never inside a code block); a text without any Markdown
goes out as it is."""

from __future__ import annotations

import re

from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message

# What could make Markdown of a text: emphasis, code, links, headings, quotes, tables, escapes,
# entities (one character class), and at a line's start list markers, indented code, setext
# underlines. Two patterns, not one alternation: the anchored branches tried at every position
# made each search three times slower (0.37 ms for 3000 characters).
_MARKUP_CHARS = re.compile(r"[*_`\[\]#>~|\\<&]")
_MARKUP_LINES = re.compile(r"^(?:\s*(?:[-+]|\d+[.)])\s| {4}|\s*[=-]+\s*$)", re.M)


def plain_text(text: str) -> str:
    """`text` as a plain-text platform shows it: Markdown rendered plain (to_plain), or the
    text itself when it holds no Markdown at all (most short replies: no parse, no render)."""
    if _MARKUP_CHARS.search(text) or _MARKUP_LINES.search(text):
        return to_plain(text)
    return text


def plain_parts(text: str, limit: int) -> list[str]:
    """`text` (Markdown) in parts whose plain rendering fits `limit`. Measured on the source
    first, which plain text rarely outgrows (only a table's padding does), because measuring
    every candidate rendered costs ~50 ms for a 9 KB word; a part whose rendering does not fit
    is split again, rendered."""
    parts: list[str] = []
    for part in split_message(text, limit):
        fits = len(plain_text(part)) <= limit
        parts.extend([part] if fits else split_message(part, limit, render=to_plain))
    return parts
