"""The model's Markdown as HTML that a chat client may render as it is, for a platform whose
messages carry a restricted HTML (a set of allowed tags, and links only of some schemes).

Sanitised by construction rather than by filtering HTML afterwards: markdown-it-py renders
the Markdown with raw HTML turned off (a model's `<script>` or `<img onerror=...>` arrives as
text, escaped), links only with the schemes the platform allows on `a href` (anything else
stays text), and images as links, since a client shows only images of the platform's own
storage. Single line breaks are kept as `<br>`: a chat reply's lines are meant as lines. What
is the platform's own: the schemes it allows.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["safe_html"]


@lru_cache(maxsize=8)
def _parser(schemes: tuple[str, ...]) -> MarkdownIt:
    def link_allowed(url: str) -> bool:
        return url.strip().lower().startswith(schemes)

    def image_as_link(_renderer: Any, tokens: Any, idx: int, _options: Any, _env: Any) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        label = escape(token.content or src, quote=False)
        if not link_allowed(src):
            return label
        return f'<a href="{escape(src, quote=True)}">{label}</a>'

    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
        ["strikethrough", "table"]
    )
    md.validateLink = link_allowed  # type: ignore[method-assign]
    md.add_render_rule("image", image_as_link)
    return md


def safe_html(text: str, schemes: tuple[str, ...]) -> str:
    """`text` (Markdown) as HTML whose links all have one of `schemes` (e.g. "https:")."""
    html = _parser(schemes).render(text).strip("\n")
    # One paragraph needs no <p>: clients add a margin around it.
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return html
