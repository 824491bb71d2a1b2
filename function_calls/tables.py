"""A plugin's tables, declared with its `Plugin(tables=...)` and created or migrated the same
way for every plugin (built-ins included), in the bot's own database.

    metadata = MetaData()
    notes = Table("notes_items", metadata, Column("id", Integer, primary_key=True), ...)

    plugin = Plugin("notes", tables=Tables(metadata, version=2, migrations={2: add_colour}))

When the bot is built (before the plugin's setup hooks, so its service finds them) and by
`chatfn migrate`, the runtime calls `Tables.ensure`: in one transaction, the version recorded
for the plugin in `plugin_schema` is read; each migration above it runs in order (`{2: f}`:
from 1 to 2); the tables and indexes that are missing are created (IF NOT EXISTS where the
database has it); `after` adds what a `MetaData` cannot say (a full-text index, a generated
column); the version is recorded. Several processes starting at once (a cluster's workers)
may race; a loser that trips over the winner's rows looks again.

Some tables a `MetaData` cannot create: a SQLite virtual table (a full-text index), a table
whose column type is known only at run time (a vector's dimension). The plugin declares them in
`on_demand` (`Table` objects of a `MetaData` of their own, with the columns it uses) and makes
them in `after` or through its database view's `create` / `create_virtual` (plugin_data.py):
declared, they are tables its statements may name, as the metadata's are.

`tables` may also be a function of the plugin's settings section returning `Tables` or None:
a plugin that needs no table in this configuration (knowledge without bases) creates none,
and its table module is imported only when it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Column, Integer, MetaData, String, Table, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from chatfn.storage.create_missing import create_missing

Step = Callable[[Connection], None]

# One row per plugin that declared tables: the schema version it last left them at.
_schema = MetaData()
plugin_schema = Table(
    "plugin_schema",
    _schema,
    Column("plugin", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)


@dataclass(frozen=True)
class Tables:
    """`metadata`: the plugin's tables (SQLAlchemy Core). `version`: its schema's version;
    `migrations`: `{n: step}` brings a database from version n-1 to n (run before the missing
    tables are created, each on the transaction's connection). `after`: run after they are.
    `on_demand`: declared tables the runtime does not create (module docstring)."""

    metadata: MetaData
    version: int = 1
    migrations: Mapping[int, Step] = field(default_factory=dict)
    after: Step | None = None
    on_demand: Sequence[Table] = ()

    def names(self) -> frozenset[str]:
        """Every declared table's name (with its schema, if it has one: `temp.x`)."""
        return frozenset(self.metadata.tables) | {t.fullname for t in self.on_demand}

    def ensure(self, engine: Engine, plugin: str, attempts: int = 3) -> None:
        """Bring the plugin's tables to `version` (idempotent)."""
        for attempt in range(attempts):
            try:
                with engine.begin() as conn:
                    self._ensure(conn, plugin)
                return
            except DBAPIError:
                if attempt == attempts - 1:
                    raise

    def _ensure(self, conn: Connection, plugin: str) -> None:
        create_missing(conn, _schema)
        row = plugin_schema.c
        stored = conn.execute(select(row.version).where(row.plugin == plugin)).scalar()
        if stored is not None:
            for step in range(stored + 1, self.version + 1):
                if step in self.migrations:
                    self.migrations[step](conn)
        create_missing(conn, self.metadata)
        if self.after is not None:
            self.after(conn)
        if stored is None:
            conn.execute(plugin_schema.insert().values(plugin=plugin, version=self.version))
        elif stored < self.version:
            conn.execute(
                plugin_schema.update().where(row.plugin == plugin).values(version=self.version)
            )


def stored_version(engine: Engine, plugin: str) -> int | None:
    """The schema version recorded for `plugin` (None: none yet)."""
    with engine.begin() as conn:
        create_missing(conn, _schema)
        row = plugin_schema.c
        return conn.execute(select(row.version).where(row.plugin == plugin)).scalar()
