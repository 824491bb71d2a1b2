"""Schema versions: Alembic migrations (chatfn/storage/migrations) for SQLite and PostgreSQL alike.

`upgrade` runs at every start (in a child process, chatfn/storage/schema_child.py) and by
`python bot.py migrate`. A database already at the head costs one plain query and does not
import Alembic (about 11 MB and 80 ms of a process's start: Alembic, Mako, Pygments; 13 MB of
a bot's peak once the migrations ran): the head is read from the revision files' `revision` and
`down_revision` lines, which tests/storage/test_migrations.py checks against Alembic's own. An
empty database gets every migration; a database made before migrations existed (tables from
`create_all`, no `alembic_version`) is brought to the baseline's columns and stamped with it,
then upgraded, so it is upgraded in place and keeps its rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

VERSIONS = Path(__file__).resolve().parent / "migrations" / "versions"
BASELINE = "0001"
# The columns a pre-migration database may lack (added by versions that used create_all and
# an ALTER of their own); brought in before it is stamped with the baseline.
_LATE_COLUMNS = {"messages": {"thinking": "TEXT"}}


@dataclass(frozen=True, slots=True)
class SchemaState:
    current: str | None  # None: no alembic_version (empty, or made before migrations)
    head: str
    pending: list[str]  # revisions still to run, oldest first
    legacy: bool  # tables from before migrations, to be stamped with the baseline

    @property
    def up_to_date(self) -> bool:
        return not self.pending


@cache
def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "chatfn.storage:migrations")
    return cfg


@cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.M)


@cache
def head() -> str:
    """The newest revision, from the revision files without importing Alembic: the one no other
    revision names as its `down_revision`. Falls back to Alembic when the files do not say it
    plainly (a merge revision, a computed value)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS.glob("[0-9]*.py"):
        found = dict(_REVISION_LINE.findall(path.read_text(encoding="utf-8")))
        rev, down = found.get("revision", ""), found.get("down_revision", "")
        if not re.fullmatch(r"[\"']\w+[\"']", rev) or not re.fullmatch(r"None|[\"']\w+[\"']", down):
            return _script().get_current_head() or BASELINE
        revisions.add(rev[1:-1])
        if down != "None":
            parents.add(down[1:-1])
    heads = revisions - parents
    if len(heads) != 1:
        return _script().get_current_head() or BASELINE
    return heads.pop()


def _current_revision(engine: Engine) -> str | None:
    """The `alembic_version` row by a plain query; None when there is none (or no table)."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # no such table: empty, or made before migrations
        return None
    return rows[0][0] if len(rows) == 1 else None


def state(engine: Engine) -> SchemaState:
    """Where the database stands, without changing it."""
    with engine.connect() as conn:
        return _state_on(conn)


def at_head(engine: Engine) -> bool:
    """Whether nothing is pending, by one plain query (no Alembic)."""
    return _current_revision(engine) == head()


def upgrade(engine: Engine) -> SchemaState:
    """Run what is pending; returns the state before. Safe to run from several processes at
    once on PostgreSQL (a transaction-level advisory lock serialises them)."""
    if at_head(engine):
        return SchemaState(head(), head(), [], False)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(4242016)"))
        before = _state_on(conn)
        if before.legacy:
            _bring_to_baseline(conn)
            _run(conn, "stamp", BASELINE)
        if before.pending:
            _run(conn, "upgrade", "head")
    return before


def _state_on(conn: Connection) -> SchemaState:
    from alembic.runtime.migration import MigrationContext

    current = MigrationContext.configure(conn).get_current_revision()
    legacy = current is None and inspect(conn).has_table("messages")
    revs = [r.revision for r in reversed(list(_script().walk_revisions()))]
    if current is None:
        pending = revs[1:] if legacy else revs
    else:
        pending = revs[revs.index(current) + 1 :] if current in revs else []
    return SchemaState(current, head(), pending, legacy)


def _bring_to_baseline(conn: Connection) -> None:
    from chatfn.storage.migrations.baseline_tables import create_missing

    insp = inspect(conn)
    for table, columns in _LATE_COLUMNS.items():
        have = {c["name"] for c in insp.get_columns(table)}
        for name, kind in columns.items():
            if name not in have:
                conn.execute(text(f'ALTER TABLE {table} ADD COLUMN "{name}" {kind}'))
    # Tables the baseline has that an old database may lack (reminders were created only
    # when the reminders built-in first ran): create those the baseline would.
    create_missing(conn)


def _run(conn: Connection, verb: str, target: str) -> None:
    from alembic import command

    cfg = _config()
    cfg.attributes["connection"] = conn
    try:
        getattr(command, verb)(cfg, target)
    finally:
        cfg.attributes.pop("connection", None)
