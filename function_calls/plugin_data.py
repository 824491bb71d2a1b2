"""A plugin's way to the database: the tables it declared, not the whole `Storage`.

    plugin = Plugin("notes", tables=Tables(metadata))

    class NoteService:
        def __init__(self, host: PluginHost) -> None:
            self.db = plugin.database(host)          # or plugin.database(ctx) in a handler

        def _add(self, text: str) -> None:          # runs on a storage thread
            with self.db.begin() as conn:
                conn.execute(insert(notes).values(text=text))

        async def add(self, text: str) -> None:
            await self.db.run(self._add, text)

`connect()` / `begin()` give a connection whose `execute` takes SQLAlchemy Core statements
that name only the plugin's own tables (`Plugin(tables=...)`): a statement that reads or writes
another table (the bot's history, another plugin's rows) raises `TableRefused` before it
reaches the database, and plain SQL text is refused (it could name any table). `run` and
`run_aside` are the storage's: blocking work off the event loop, retried while the database is
busy.

What a `MetaData` cannot create, a plugin declares too (`Tables(on_demand=[...])`) and makes
through typed doors that name the declared table: `create(table)` (a table whose shape is known
only at run time: a vector's dimension), `create_virtual(table, Fts5(...) | Fts5Vocab(...) |
Vec0(...))` (function_calls/plugin_ddl.py) and `drop(table)`. `sqlite_extension(load)` is the
same view over a second engine on the same SQLite file whose connections load an extension
(sqlite-vec): the plugin never builds an engine of its own.

`audit` writes a row to the bot's audit log (the one core table a plugin may add to), as a
function call of the plugin's would be.

This is the plugin API's boundary, not a sandbox: a plugin is Python code in the bot's
process. It keeps a plugin's data where its declaration says, so that a plugin cannot come to
depend on (or damage) the core's tables by accident, and an operator reading a plugin's
`tables` knows what it touches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import Table, create_engine, event, text
from sqlalchemy.engine import Connection, CursorResult, Dialect, Engine
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.util import find_tables

from function_calls.plugin_ddl import VirtualModule, virtual_table_sql

if TYPE_CHECKING:
    from chatfn.storage.db import Storage
    from function_calls.tables import Tables

__all__ = ["PluginConnection", "PluginDatabase", "TableRefused"]

P = ParamSpec("P")
R = TypeVar("R")


class TableRefused(PermissionError):
    """A plugin's statement named a table the plugin did not declare (or was plain SQL)."""


def tables_named(statement: ClauseElement) -> set[str]:
    """The names of every table `statement` reads or writes (joins, subqueries, the target of
    an INSERT / UPDATE / DELETE included)."""
    found = find_tables(statement, include_aliases=True, include_joins=True, include_crud=True)
    names: set[str] = set()
    for item in found:
        table = getattr(item, "element", item)  # an alias: the table behind it
        if isinstance(table, Table):
            names.add(table.fullname)
    return names


# Statements a view has found to name only its tables, kept (with the object, so that its id
# is not reused) to pass again without a walk: a plugin's statement built once and run per
# row or per search (the knowledge search runs a dozen) costs the walk once. Core statements
# do not change after they are built (each method returns a new one).
_CHECKED_KEPT = 512


class _Checked:
    def __init__(self) -> None:
        self._seen: dict[int, ClauseElement] = {}

    def __contains__(self, statement: ClauseElement) -> bool:
        return self._seen.get(id(statement)) is statement

    def add(self, statement: ClauseElement) -> None:
        if len(self._seen) >= _CHECKED_KEPT:
            self._seen.clear()
        self._seen[id(statement)] = statement


class PluginConnection:
    """A database connection that executes only statements on the plugin's own tables."""

    def __init__(
        self,
        conn: Connection,
        plugin: str,
        allowed: frozenset[str],
        checked: _Checked | None = None,
    ) -> None:
        self._conn = conn
        self.plugin = plugin
        self.allowed = allowed
        self._checked = checked if checked is not None else _Checked()

    @property
    def dialect(self) -> Dialect:
        return self._conn.dialect

    def check(self, statement: Any) -> None:
        """TableRefused unless `statement` is a Core statement on the plugin's tables only."""
        if isinstance(statement, (str, TextClause)):
            raise TableRefused(
                f"plugin {self.plugin}: plain SQL is not accepted (it could name any table); "
                "build the statement with SQLAlchemy Core on the plugin's declared tables"
            )
        if not isinstance(statement, ClauseElement):
            raise TableRefused(f"plugin {self.plugin}: not a SQL statement: {statement!r}")
        if statement in self._checked:
            return
        others = tables_named(statement) - self.allowed
        if others:
            declared = ", ".join(sorted(self.allowed)) or "none"
            raise TableRefused(
                f"plugin {self.plugin} may use only the tables it declared ({declared}); "
                f"the statement uses {', '.join(sorted(others))}"
            )
        self._checked.add(statement)

    def _declared(self, tables: tuple[Table, ...]) -> None:
        others = {t.fullname for t in tables} - self.allowed
        if others:
            declared = ", ".join(sorted(self.allowed)) or "none"
            raise TableRefused(
                f"plugin {self.plugin} may make or drop only the tables it declared "
                f"({declared}), not {', '.join(sorted(others))}"
            )

    def create(self, table: Table) -> None:
        """CREATE TABLE IF NOT EXISTS `table` (a declared one) and its indexes."""
        self._declared((table,))
        self._conn.execute(CreateTable(table, if_not_exists=True))
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            self._conn.execute(CreateIndex(index, if_not_exists=True))

    def create_virtual(self, table: Table, module: VirtualModule) -> None:
        """CREATE VIRTUAL TABLE IF NOT EXISTS `table` USING `module` (SQLite), both the table
        and what the module reads from (an fts5vocab's source) declared ones."""
        self._declared((table, *module.sources()))
        self._conn.execute(text(virtual_table_sql(table, module)))

    def drop(self, table: Table) -> None:
        """DROP TABLE IF EXISTS `table` (a declared one): a vector table of another dimension."""
        self._declared((table,))
        self._conn.execute(DropTable(table, if_exists=True))

    def execute(
        self, statement: Any, parameters: Mapping[str, Any] | list[Any] | None = None
    ) -> CursorResult[*tuple[Any, ...]]:
        self.check(statement)
        return self._conn.execute(statement, parameters)

    def scalar(self, statement: Any, parameters: Mapping[str, Any] | None = None) -> Any:
        self.check(statement)
        return self._conn.scalar(statement, parameters)


@contextmanager
def _refusal_unwrapped() -> Iterator[None]:
    """The storage reports whatever a call raised as a StorageError; a refusal is not one."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc.__cause__, TableRefused):
            raise exc.__cause__ from None
        raise


class PluginDatabase:
    """The plugin's tables in the bot's database (module docstring)."""

    def __init__(
        self,
        storage: Storage,
        plugin: str,
        tables: Tables | None,
        *,
        engine: Engine | None = None,
    ) -> None:
        self._storage = storage
        self.plugin = plugin
        self.allowed = tables.names() if tables is not None else frozenset()
        self._tables = tables
        # A second engine of this view's own (`sqlite_extension`), disposed by `close`.
        self._own_engine = engine
        self._checked = _Checked()

    @classmethod
    def of(cls, source: Any, plugin: str, tables: Tables | None) -> PluginDatabase:
        """`plugin`'s `tables` in the bot's database, from the `PluginHost` its hooks get or
        the `MessageContext` of a handler: what `Plugin.database` makes, for code that holds
        the declaration's name and tables but not the `Plugin` (a console view its package's
        `__init__` imports). Neither source hands a plugin the whole `Storage` (issue 37 §2)."""
        if hasattr(source, "message"):  # a handler's context: the storage is its turn's
            return cls(source.turn.storage, plugin, tables)
        # The running bot's plugin host (chatfn/runtime/plugin_host.py), which offers plugins
        # no storage of their own; a bare object with `storage` (a test's stand-in) as is.
        storage_of = getattr(source, "_storage_for_tables", None)
        return cls(storage_of() if storage_of else source.storage, plugin, tables)

    @property
    def _engine(self) -> Engine:
        return self._own_engine if self._own_engine is not None else self._storage.engine

    @property
    def url(self) -> str:
        """The database's URL without its password (a key for per-database state)."""
        return self._storage.url

    @property
    def dialect_name(self) -> str:
        return self._engine.dialect.name

    @property
    def in_memory(self) -> bool:
        """Whether the database lives in this process's memory (a second connection to it
        would see another, empty database)."""
        url = self._storage.engine.url
        return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")

    @contextmanager
    def connect(self) -> Iterator[PluginConnection]:
        """A connection for reads (blocking: inside a function given to `run`)."""
        with self._engine.connect() as conn:
            yield PluginConnection(conn, self.plugin, self.allowed, self._checked)

    @contextmanager
    def begin(self) -> Iterator[PluginConnection]:
        """A transaction, committed when the block ends (blocking: inside `run`)."""
        with self._engine.begin() as conn:
            yield PluginConnection(conn, self.plugin, self.allowed, self._checked)

    def sqlite_extension(self, module: Any, load: Callable[[Any], None]) -> PluginDatabase:
        """This view over a second engine on the same SQLite file, built on the DB-API
        `module` (one whose connections can load extensions: `sqlite3` where built so, else
        `pysqlite3`), with `load(dbapi_connection)` run on each new connection (sqlite-vec's
        `load`). Same tables, same checks; `close` disposes the engine. ValueError on another
        database or one in memory (blocking: inside `run`)."""
        if self.dialect_name != "sqlite" or self.in_memory:
            raise ValueError("a loaded extension needs the bot's database to be a SQLite file")
        url = self._storage.engine.url
        engine = create_engine(url, module=module)

        @event.listens_for(engine, "connect")
        def _load(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.enable_load_extension(True)
            load(dbapi_conn)
            dbapi_conn.enable_load_extension(False)
            dbapi_conn.execute("PRAGMA busy_timeout=2000")

        return PluginDatabase(self._storage, self.plugin, self._tables, engine=engine)

    def close(self) -> None:
        """Dispose the engine of a `sqlite_extension` view (the bot's own is not this
        view's to close)."""
        if self._own_engine is not None:
            self._own_engine.dispose()

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`fn(*args, **kwargs)` on a storage thread, retried while the database is busy;
        StorageError when the database failed, TableRefused as itself (a bug of the
        plugin's, not the database's)."""
        with _refusal_unwrapped():
            return await self._storage.run(fn, *args, **kwargs)

    async def run_aside(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`run` for long reads no turn waits on (a console page): the storage's aside threads."""
        with _refusal_unwrapped():
            return await self._storage.run_aside(fn, *args, **kwargs)

    async def audit(
        self,
        *,
        platform: str,
        chat_id: str,
        sender_id: str,
        message_id: str,
        function: str,
        arguments: dict[str, Any],
        source: str,
        outcome: str,
        detail: str = "",
    ) -> None:
        """A row in the bot's audit log for work the plugin did on someone's behalf outside a
        function call (a reminder fired by the scheduler)."""
        await self._storage.run(
            self._storage.add_tool_call,
            platform=platform,
            chat_id=chat_id,
            sender_id=sender_id,
            message_id=message_id,
            function=function,
            arguments=arguments,
            source=source,
            outcome=outcome,
            detail=detail,
        )
