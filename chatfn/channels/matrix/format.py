"""The model's Markdown as a Matrix message: `body` (plain text, what every client can show)
and `formatted_body` in `org.matrix.custom.html`, restricted to what the spec lets clients
render (https://spec.matrix.org/v1.16/client-server-api/#mroommessage-msgtypes, "m.text":
the allowed tags and attributes).

Sanitised by construction rather than by filtering HTML afterwards: markdown-it-py renders
the Markdown with raw HTML turned off (a model's `<script>` or `<img onerror=...>` arrives as
text, escaped), links only with the schemes the spec allows on `a href` (http, https, ftp,
mailto, magnet; anything else stays text), and images as links, since `img` may only show
`mxc://` URIs. Single line breaks are kept as `<br>`: a chat reply's lines are meant as lines.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt

from chatfn.channels.markdown import to_plain

__all__ = ["LINK_SCHEMES", "to_body", "to_html"]

#: The `a href` schemes of the spec's allowed HTML.
LINK_SCHEMES = ("https:", "http:", "ftp:", "mailto:", "magnet:")


def _link_allowed(url: str) -> bool:
    lowered = url.strip().lower()
    return lowered.startswith(LINK_SCHEMES)


def _image_as_link(_renderer: Any, tokens: Any, idx: int, _options: Any, _env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    label = escape(token.content or src, quote=False)
    if not _link_allowed(src):
        return label
    return f'<a href="{escape(src, quote=True)}">{label}</a>'


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
        ["strikethrough", "table"]
    )
    md.validateLink = _link_allowed  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_link)
    return md


def to_html(text: str) -> str:
    """`formatted_body` of `text` (see the module docstring)."""
    html = _parser().render(text).strip("\n")
    # One paragraph needs no <p>: clients add a margin around it.
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return html


def to_body(text: str) -> str:
    """`body`: the same words without markup (links as `label (url)`)."""
    return to_plain(text)
