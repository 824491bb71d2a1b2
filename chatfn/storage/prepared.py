"""Statements of every message, compiled once and run on the driver's cursor.

A turn's two transactions run about fifteen statements. Through SQLAlchemy Core each one costs
30-40 µs of Python before the driver sees it (an execution context, the compiled cache's key,
parameter processing, a result object), several times what SQLite takes to run it; the
per-message CPU target of issue 27 (bench/README.md, "Issue 27") could not be met with that.
`Prepared` keeps what SQLAlchemy does that matters and drops the rest:

- the SQL is SQLAlchemy's own, compiled once per dialect from the same Core statement, so it
  is the statement the rest of the bot would have run (same placeholders, casts, RETURNING);
- parameters go through the column types' own bind processors (a `DateTime` is stored as
  SQLAlchemy stores it, so Core reads elsewhere see the same value), and missing insert values
  take the columns' Python-side defaults, as Core fills them;
- result columns go through the types' result processors;
- the statement runs on the transaction's connection (`engine.begin()`): the pool, the commit
  event, fencing in the same transaction, all as before;
- driver errors come back as SQLAlchemy's exceptions (`OperationalError` for a locked
  database, which `Storage.run` retries; `IntegrityError`), and a dropped network connection
  is invalidated, so the pool does not hand it out again;
- the loop guard (chatfn/storage/loop_guard.py) sees each statement, as it sees Core's;
- inside a pipelined transaction (chatfn/storage/pipeline.py) each statement gets a cursor of its
  own, which keeps its answer until it is read: `later_scalar` and `later_rows` send without
  waiting, and the answer is read when the transaction needs it.

Used for SQLite and PostgreSQL (psycopg): the dialects chatfn tests. Any other dialect runs the
same statement through Core (`Connection.execute`), unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from chatfn.storage import loop_guard
from chatfn.storage.driver_errors import as_sqlalchemy
from chatfn.storage.pipeline import PIPE, Later, Pipe, later

Processor = Callable[[Any], Any] | None
# Dialects whose statements run on the cursor (the others go through Core).
FAST_DIALECTS = ("sqlite", "postgresql")


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    positional: bool
    # (name, bind processor, default) of each parameter, in placeholder order when positional.
    params: tuple[tuple[str, Processor, Any], ...]
    results: tuple[Processor, ...]  # per result column; empty when none needs processing
    pipes: bool  # the dialect may run it in a pipelined transaction (chatfn/storage/pipeline.py)
    # `params` split for `_args`: the names and defaults in order, and (position, processor)
    # of the few with a bind processor (most have none).
    names: tuple[str, ...] = ()
    defaults: tuple[Any, ...] = ()
    processed: tuple[tuple[int, Callable[[Any], Any]], ...] = ()


class Prepared:
    """One Core statement, run with `execute`/`executemany`/`rows`/`scalar` on a Connection.

    `columns`: for an INSERT, the columns it names (default: every column but an autoincrement
    primary key), so one compiled form serves every call; a value not given takes the column's
    Python-side default, or NULL."""

    __slots__ = ("stmt", "_columns", "_defaults", "_by_dialect")

    def __init__(self, stmt: Executable, columns: Sequence[str] | None = None) -> None:
        if not isinstance(stmt, ClauseElement):  # a Core statement: executed and compiled here
            raise TypeError(f"Prepared takes a Core statement, not {type(stmt).__name__}")
        self.stmt = stmt
        self._columns: list[str] | None = None
        self._defaults: dict[str, Any] = {}
        if isinstance(stmt, Insert) and not stmt._values:  # values given per call
            table = stmt.table
            cols = [
                c
                for c in table.columns
                if (c.name in columns if columns is not None else not _autoincrement(c))
            ]
            self._columns = [c.name for c in cols]
            for c in cols:
                default = c.default
                if isinstance(default, ScalarElementColumnDefault):  # `is_scalar`
                    self._defaults[c.name] = default.arg
        self._by_dialect: dict[str, _Compiled | None] = {}

    def _compiled(self, dialect: Dialect) -> _Compiled | None:
        key = dialect.name
        try:
            return self._by_dialect[key]
        except KeyError:
            pass
        compiled = self._compile(dialect) if key in FAST_DIALECTS else None
        self._by_dialect[key] = compiled
        return compiled

    def _compile(self, dialect: Dialect) -> _Compiled | None:
        if dialect.paramstyle not in ("qmark", "format", "pyformat", "named"):
            return None
        c = self.stmt.compile(dialect=dialect, column_keys=self._columns)
        if not isinstance(c, SQLCompiler):  # a Core statement compiles with SQLCompiler
            return None
        names: Iterable[str] | None = c.positiontup if dialect.positional else c.binds
        if names is None:
            return None
        params = []
        for name in names:
            bind = c.binds[name]
            if getattr(bind, "expanding", False) or bind.callable is not None:
                return None  # built per call (IN lists): not for this path
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            # Not given: the column's Python-side default, the statement's own value (a
            # literal of the statement), or NULL.
            default = self._defaults.get(name, None if bind.required else bind.value)
            params.append((name, proc, default))
        results: tuple[Processor, ...] = ()
        selected = getattr(self.stmt, "selected_columns", None)
        if selected is None:
            returning = getattr(self.stmt, "_returning", ())
            selected = list(returning) if returning else None
        if selected is not None:
            procs = tuple(
                col.type.dialect_impl(dialect).result_processor(dialect, None) for col in selected
            )
            results = procs if any(p is not None for p in procs) else ()
        pipes = dialect.name == "postgresql"
        return _Compiled(
            c.string,
            bool(dialect.positional),
            tuple(params),
            results,
            pipes,
            tuple(name for name, _, _ in params),
            tuple(default for _, _, default in params),
            tuple((i, proc) for i, (_, proc, _) in enumerate(params) if proc is not None),
        )

    # -- running ---------------------------------------------------------------------------
    def execute(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """Run with one parameter set; returns the DB-API cursor (rowcount, fetch*), or
        SQLAlchemy's CursorResult when the dialect runs through Core."""
        compiled = self._compiled(conn.dialect)
        if compiled is None:
            return conn.execute(self.stmt, dict(params))
        args = _args(compiled, params)
        pipe = _pipe(conn, compiled)
        cursor = _cursor(conn, pipe)
        _run(conn, cursor, compiled.sql, args, many=False, pipe=pipe)
        return cursor

    def later_scalar(self, conn: Connection, params: Mapping[str, Any]) -> Later:
        """`scalar`, sent now and read when `value()` is called: on a pipelined connection
        the statements sent in between go out without waiting for this one's answer."""
        return self._later(conn, params, _first, self.scalar)

    def later_rows(self, conn: Connection, params: Mapping[str, Any]) -> Later:
        """`rows`, sent now and read when `value()` is called (see `later_scalar`)."""
        return self._later(conn, params, _all, self.rows)

    def _later(
        self,
        conn: Connection,
        params: Mapping[str, Any],
        how: Callable[[_Compiled, Any], Any],
        at_once: Callable[[Connection, Mapping[str, Any]], Any],
    ) -> Later:
        """Sent into the pipeline and read by `how` later; off a pipeline, `at_once` now."""
        compiled = self._compiled(conn.dialect)
        pipe = _pipe(conn, compiled)
        if compiled is None or pipe is None:
            return Later(at_once(conn, params))
        cursor = _cursor(conn, pipe)
        _run(conn, cursor, compiled.sql, _args(compiled, params), many=False, pipe=pipe)
        return later(conn, functools.partial(_read, pipe, how, compiled, cursor))

    def executemany(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        compiled = self._compiled(conn.dialect)
        if compiled is None:
            conn.execute(self.stmt, [dict(r) for r in rows])
            return
        args = [_args(compiled, r) for r in rows]
        pipe = _pipe(conn, compiled)
        if len(args) == 1:
            _run(conn, _cursor(conn, pipe), compiled.sql, args[0], many=False, pipe=pipe)
        else:
            _run(conn, _cursor(conn, pipe), compiled.sql, args, many=True, pipe=pipe)

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Every result row, as tuples with the types' result processing."""
        compiled = self._compiled(conn.dialect)
        if compiled is None:
            return [tuple(r) for r in conn.execute(self.stmt, dict(params))]
        pipe = _pipe(conn, compiled)
        cursor = _cursor(conn, pipe)
        _run(conn, cursor, compiled.sql, _args(compiled, params), many=False, pipe=pipe)
        return _read(pipe, _all, compiled, cursor)

    def scalar(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """The first column of the first row (None when there is none)."""
        compiled = self._compiled(conn.dialect)
        if compiled is None:
            return conn.execute(self.stmt, dict(params)).scalar()
        pipe = _pipe(conn, compiled)
        cursor = _cursor(conn, pipe)
        _run(conn, cursor, compiled.sql, _args(compiled, params), many=False, pipe=pipe)
        return _read(pipe, _first, compiled, cursor)


def _pipe(conn: Connection, compiled: _Compiled | None) -> Pipe | None:
    """The pipeline `conn` sends into (chatfn/storage/pipeline.py), or None: looked up only where
    the
    dialect can pipeline, so a statement on SQLite pays nothing for it."""
    if compiled is None or not compiled.pipes:
        return None
    return conn.info.get(PIPE)


def _read(
    pipe: Pipe | None, how: Callable[[_Compiled, Any], Any], compiled: _Compiled, cursor: Any
) -> Any:
    """A result, read once its answer is in (`Pipe.sync`)."""
    if pipe is not None:
        pipe.sync()
    return how(compiled, cursor)


def _all(compiled: _Compiled, cursor: Any) -> list[tuple[Any, ...]]:
    rows = cursor.fetchall()
    procs = compiled.results
    if procs and rows:
        return [
            tuple(v if p is None else p(v) for p, v in zip(procs, r, strict=True)) for r in rows
        ]
    return rows


def _first(compiled: _Compiled, cursor: Any) -> Any:
    row = cursor.fetchone()
    cursor.fetchall()  # the rest (none, for the statements used here): end the statement
    if row is None:
        return None
    value = row[0]
    if compiled.results and compiled.results[0] is not None:
        return compiled.results[0](value)
    return value


def _autoincrement(column: Any) -> bool:
    return bool(column.primary_key and column.autoincrement in (True, "auto"))


def _args(compiled: _Compiled, params: Mapping[str, Any]) -> Any:
    """The driver's parameters: each value (or its default) looked up in C (`map`), then the
    few with a bind processor processed. This runs for every bind value of every statement
    (~170 a message); a Python expression per value cost a fifth of the storage thread."""
    values = list(map(params.get, compiled.names, compiled.defaults))
    for i, proc in compiled.processed:
        values[i] = proc(values[i])
    if compiled.positional:
        return tuple(values)
    return dict(zip(compiled.names, values, strict=True))


def _cursor(conn: Connection, pipe: Pipe | None) -> Any:
    """A DB-API cursor of the connection's driver connection, made once and reused by every
    statement on it (kept in the pooled connection's `info`, with the driver connection it
    belongs to: one replaced after an invalidation gets a cursor of its own). In a pipelined
    transaction a new cursor each time: a cursor holds one answer, the last sent through it."""
    dbapi_conn = conn.connection.dbapi_connection
    if pipe is not None:
        return dbapi_conn.cursor()  # type: ignore[union-attr]
    cached = conn.info.get("prepared_cursor")
    if cached is not None and cached[0] is dbapi_conn:
        return cached[1]
    cursor = dbapi_conn.cursor()  # type: ignore[union-attr]
    conn.info["prepared_cursor"] = (dbapi_conn, cursor)
    return cursor


def _run(
    conn: Connection, cursor: Any, sql: str, args: Any, *, many: bool, pipe: Pipe | None = None
) -> None:
    if loop_guard.LoopGuard._active:
        loop_guard.check(sql)
    if pipe is not None:
        pipe.sent = True
    try:
        if many:
            cursor.executemany(sql, args)
        else:
            cursor.execute(sql, args)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise as_sqlalchemy(conn, exc, sql, args, cursor) from exc
