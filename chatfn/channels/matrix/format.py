"""The model's Markdown as a Matrix message: `body` (plain text, what every client can show)
and `formatted_body` in `org.matrix.custom.html`, restricted to what the spec lets clients
render (https://spec.matrix.org/v1.16/client-server-api/#mroommessage-msgtypes, "m.text":
the allowed tags and attributes).

Sanitised by construction (chatfn/channels/kit/html.py): raw HTML is text, links only with
the schemes the spec allows on `a href` (http, https, ftp, mailto, magnet; anything else
stays text), and images as links, since `img` may only show `mxc://` URIs.
"""

from __future__ import annotations

from chatfn.channels.kit.html import safe_html
from chatfn.channels.markdown import to_plain

__all__ = ["LINK_SCHEMES", "to_body", "to_html"]

#: The `a href` schemes of the spec's allowed HTML.
LINK_SCHEMES = ("https:", "http:", "ftp:", "mailto:", "magnet:")


def to_html(text: str) -> str:
    """`formatted_body` of `text` (see the module docstring)."""
    return safe_html(text, LINK_SCHEMES)


def to_body(text: str) -> str:
    """`body`: the same words without markup (links as `label (url)`)."""
    return to_plain(text)
