"""The virtual tables a plugin may make through its database view, each kind typed.

SQLite's full-text and vector indexes are virtual tables (`CREATE VIRTUAL TABLE t USING
fts5(...)`), which SQLAlchemy's `CreateTable` cannot say. A plugin declares such a table as a
`Table` with the columns it reads and writes (`Tables(on_demand=[...])`, function_calls/tables.py)
and has it made with `conn.create_virtual(table, Fts5(...))` (plugin_data.py): the statement is
built here from the declared table's name and checked parts, never from a plugin's SQL text, so
it can name no table but the declared ones (`Fts5Vocab(of=...)` names its source as a declared
`Table` too, checked the same way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Table

__all__ = ["Fts5", "Fts5Vocab", "Vec0", "VirtualModule", "virtual_table_sql"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_TOKENIZE = re.compile(r"^[A-Za-z0-9_ ]{0,200}$")


def _name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{what}: not a plain name: {value!r}")
    return value


def _qualified(table: Table) -> str:
    if table.schema is None:
        return _name(table.name, "table")
    return f"{_name(table.schema, 'schema')}.{_name(table.name, 'table')}"


@dataclass(frozen=True)
class Fts5:
    """`fts5(col, col UNINDEXED, ..., tokenize = '...')`: a full-text index over `columns`
    (those in `unindexed` stored, not searched)."""

    columns: tuple[str, ...]
    unindexed: tuple[str, ...] = ()
    tokenize: str = ""

    def arguments(self) -> str:
        parts = [
            _name(c, "column") + (" UNINDEXED" if c in self.unindexed else "") for c in self.columns
        ]
        if self.tokenize:
            if not _TOKENIZE.match(self.tokenize):
                raise ValueError(f"fts5 tokenize: not a plain option list: {self.tokenize!r}")
            parts.append(f"tokenize = '{self.tokenize}'")
        return "fts5(" + ", ".join(parts) + ")"

    def sources(self) -> tuple[Table, ...]:
        return ()


@dataclass(frozen=True)
class Fts5Vocab:
    """`fts5vocab(of, kind)`: the terms of the FTS5 table `of` (itself a declared table), per
    row, column or instance."""

    of: Table
    kind: Literal["row", "col", "instance"] = "row"

    def arguments(self) -> str:
        kind = self.kind if self.kind in ("row", "col", "instance") else ""
        if not kind:
            raise ValueError(f"fts5vocab: no such kind {self.kind!r}")
        source = _name(self.of.name, "table")
        if self.of.schema is not None:
            source = f"{_name(self.of.schema, 'schema')}, {source}"
        return f"fts5vocab({source}, {kind})"

    def sources(self) -> tuple[Table, ...]:
        return (self.of,)


@dataclass(frozen=True)
class Vec0:
    """sqlite-vec's `vec0(column float[dim] distance_metric=metric)`: nearest-vector search."""

    column: str
    dim: int
    metric: Literal["cosine", "l2", "l1"] = "cosine"

    def arguments(self) -> str:
        if not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim <= 0:
            raise ValueError(f"vec0: a dimension is a positive integer, not {self.dim!r}")
        if self.metric not in ("cosine", "l2", "l1"):
            raise ValueError(f"vec0: no such distance metric {self.metric!r}")
        return (
            f"vec0({_name(self.column, 'column')} float[{self.dim}] distance_metric={self.metric})"
        )

    def sources(self) -> tuple[Table, ...]:
        return ()


VirtualModule = Fts5 | Fts5Vocab | Vec0


def virtual_table_sql(table: Table, module: VirtualModule) -> str:
    """The CREATE statement of `table` as a `module` virtual table (IF NOT EXISTS)."""
    if not isinstance(module, (Fts5, Fts5Vocab, Vec0)):
        raise TypeError(f"not a virtual table module: {module!r}")
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS {_qualified(table)} USING {module.arguments()}"
