"""The documentation site's channel pages, filled from the code at build time (issue 39 §2).

mkdocs.yml loads this file as a hook. A page under docs/channels/ says what it shows with
markers, each replaced when the site is built:

- `<!-- chatfn: readme NAME -->`: the channel's README, `ChannelSpec.readme` (a package
  channel's own chatfn/channels/NAME/README.md): its first heading dropped (the page has its
  title), its headings moved under the page's, `docs/...` links made relative to the page.
  Included, not copied, so the README stays the one place a channel's set-up is written and
  the site cannot fall behind it.
- `<!-- chatfn: capabilities NAME -->`: the channel's row of the capability table
  (chatfn.capabilities), as a two-column table.
- `<!-- chatfn: settings NAME -->`: every `channels.NAME.*` key with its type, default and
  meaning (chatfn.docs_reference), the same rows as docs/reference/config.md.

A marker naming a channel that is not built in, or a README that is missing, stops the build
(MarkerError) instead of leaving a hole in the page. tests/test_docs_site.py checks every
built-in channel has a page and builds the site.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

__all__ = [
    "MarkerError",
    "capabilities",
    "expand",
    "for_page",
    "on_page_markdown",
    "readme",
    "settings",
]

MARKER = re.compile(r"<!-- chatfn: (\w+) (\w+) -->")
_HEADING = re.compile(r"^(#{1,6})(\s)", re.MULTILINE)
_DOCS_LINK = re.compile(r"\]\(docs/")


class MarkerError(ValueError):
    """A marker the build cannot fill: an unknown kind, a channel not built in, no README."""


def _builtin() -> set[str]:
    from chatfn.runtime.channel_registry import BUILTIN

    return set(BUILTIN)


@cache
def _specs() -> dict[str, Any]:
    from chatfn.runtime.channel_registry import find_channels

    return dict(find_channels().specs)


def _spec(name: str) -> Any:
    spec = _specs().get(name)
    if spec is None:
        raise MarkerError(f"no channel named {name!r}")
    return spec


def readme(name: str, depth: int = 1) -> str:
    """The channel's README (`ChannelSpec.readme`: chatfn/channels/NAME/README.md for a
    package channel) for a page `depth` folders below docs/: the title line dropped, the
    shallowest remaining heading made `##`, `](docs/` links pointed at the site's pages."""
    text = str(_spec(name).readme or "")
    if not text.strip():
        raise MarkerError(f"channel {name!r} has no README to include")
    return for_page(text, depth)


def for_page(text: str, depth: int = 1) -> str:
    """A README's Markdown as part of a page `depth` folders below docs/ (see `readme`)."""
    lines = text.splitlines()
    if lines and lines[0].startswith("#"):
        lines = lines[1:]
    body = "\n".join(lines).strip("\n")
    levels = [len(m.group(1)) for m in _HEADING.finditer(body)]
    shift = 2 - min(levels) if levels else 0
    if shift:
        body = _HEADING.sub(lambda m: "#" * max(1, len(m.group(1)) + shift) + m.group(2), body)
    return _DOCS_LINK.sub("](" + "../" * depth, body) + "\n"


def capabilities(name: str) -> str:
    """The channel's capability row (what its ChannelSpec declares) as `| capability | |`."""
    from chatfn.runtime.channel_caps import COLUMNS

    caps = _spec(name).capabilities
    cells = caps.cells() if caps is not None else ["?"] * len(COLUMNS)
    rows = [f"| {column} | {cell} |" for column, cell in zip(COLUMNS, cells, strict=True)]
    return "| capability | |\n| --- | --- |\n" + "\n".join(rows) + "\n"


@cache
def _entries() -> tuple[Any, ...]:
    from chatfn.docs_reference import entries

    return tuple(entries())


def settings(name: str) -> str:
    """The `channels.NAME.*` keys as the configuration reference shows them."""
    from chatfn.docs_reference import _cell

    prefix = f"channels.{name}."
    rows = [e for e in _entries() if e.path.startswith(prefix)]
    if not rows:
        raise MarkerError(f"no settings under {prefix}*")
    out = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for e in rows:
        meaning = (("**Deprecated.** " if e.deprecated else "") + e.meaning).strip()
        default = f"`{_cell(e.default)}`" if e.default else ""
        out.append(f"| `{e.path}` | {_cell(e.type)} | {default} | {_cell(meaning)} |")
    return "\n".join(out) + "\n"


def expand(markdown: str, depth: int = 1) -> str:
    """`markdown` with every marker replaced by what it names."""

    def fill(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if name not in _builtin():
            raise MarkerError(f"{match.group(0)}: {name!r} is not one of chatfn's channels")
        if kind == "readme":
            return readme(name, depth)
        if kind == "capabilities":
            return capabilities(name)
        if kind == "settings":
            return settings(name)
        raise MarkerError(f"{match.group(0)}: unknown kind {kind!r}")

    return MARKER.sub(fill, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs hook: fill the markers of a page (depth from its place under docs/)."""
    if "<!-- chatfn: " not in markdown:
        return markdown
    depth = str(page.file.src_uri).count("/")
    try:
        return expand(markdown, depth)
    except MarkerError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_uri}: {exc}") from exc
