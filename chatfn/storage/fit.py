"""Audit rows store what came, whatever came: a value wider than its column is cut with a
marker saying how much was cut, and characters no database accepts are replaced, so the insert
cannot fail on the value. Why: an audit row lost to "value too long for type character
varying(64)" (PostgreSQL; SQLite does not enforce widths) is exactly the row an operator
needs: an unknown 200-character function name from a model or an MCP client."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import String, Table

MARK = "…[+{}]"


def clip(text: str, width: int) -> str:
    """`text`, or its first characters and `…[+N]` (N characters cut) within `width`."""
    if len(text) <= width:
        return text
    # The marker may take at most half the column; a narrower one gets a bare "…".
    for keep in range(width - len(MARK.format(len(text) - width)), width // 2 - 1, -1):
        mark = MARK.format(len(text) - keep)
        if keep + len(mark) <= width:
            return text[:keep] + mark
    return text[: max(width - 1, 0)] + "…"


def storable(text: str) -> str:
    """`text` without what a database refuses: NUL (PostgreSQL text cannot hold it) and lone
    surrogates (not encodable as UTF-8), each replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def fit(
    table: Table, values: dict[str, Any], widths: dict[str, int] | None = None
) -> dict[str, Any]:
    """`values` for an insert into `table`: every string made storable and cut to its column's
    width (`widths` gives one for unbounded Text columns)."""
    out = dict(values)
    columns = _widths(table)
    for name, value in values.items():
        if not isinstance(value, str) or name not in columns:
            continue
        width = widths.get(name) if widths else None
        if width is None:
            width = columns[name]
        value = storable(value)
        out[name] = clip(value, width) if width else value
    return out


@functools.cache
def _widths(table: Table) -> dict[str, int | None]:
    """Each column's width (None: unbounded or not a string), once per table: rows are fitted
    on every message, and looking columns up in SQLAlchemy's collection cost more than the
    fitting."""
    return {c.name: c.type.length if isinstance(c.type, String) else None for c in table.columns}
