"""Alembic migrations on SQLite and on the machine's PostgreSQL: from an empty database, from a
database made by the version before migrations (create_all, no alembic_version), and no drift
between the migrated schema and the models."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from sqlalchemy import MetaData, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from chatfn.storage import schema
from chatfn.storage.db import Storage
from chatfn.storage.migrations.baseline_tables import metadata as baseline
from chatfn.storage.models import metadata as core_metadata
from function_calls.builtins.reminders.service import reminder_metadata
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chatfn.db'}"
    return request.getfixturevalue("pg_url")


def model_metadata(engine) -> MetaData:
    md = MetaData()
    for source in (core_metadata, reminder_metadata):
        for table in source.tables.values():
            table.to_metadata(md)
    SQLAlchemyJobStore(engine=engine, metadata=md)  # declares apscheduler_jobs as it would
    return md


def test_empty_database_migrates_to_head_without_drift(db_url):
    storage = Storage(db_url)
    before = storage.migrate()
    assert before.current is None and not before.legacy and before.pending[0] == schema.BASELINE
    assert storage.schema_state().current == schema.head()
    with storage.engine.connect() as conn:
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}),
            model_metadata(storage.engine),
        )
    assert diff == [], diff
    assert storage.migrate().pending == []  # a second start runs nothing
    storage.close()


def test_database_from_before_migrations_upgrades_in_place(db_url):
    """Today's 0.1.0 schema made by create_all, without messages.thinking (an older file) and
    without the reminder tables (made lazily), with a row: upgraded, row kept."""
    engine = create_engine(db_url)
    old = MetaData()
    for table in baseline.tables.values():
        if table.name in ("messages", "tool_calls"):
            copy = table.to_metadata(old)
            if table.name == "messages":
                copy._columns.remove(copy.c.thinking)  # noqa: SLF001
    old.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO messages (platform, chat_id, is_group, role, sender_id, sender_name,"
                " text, message_id, created_at) VALUES ('console', 'c1', false, 'user', 'u',"
                " 'u', 'kept', '', :now)"
            ),
            {"now": datetime.now(UTC)},
        )
    engine.dispose()
    storage = Storage(db_url)
    state = storage.schema_state()
    assert state.legacy and state.current is None
    before = storage.migrate()
    assert before.legacy
    assert storage.schema_state().current == schema.head()
    names = set(inspect(storage.engine).get_table_names())
    assert {"reminders", "apscheduler_jobs", "handled_messages", "alembic_version"} <= names
    assert [m.text for m in storage.recent_messages("console", "c1", 5)] == ["kept"]
    storage.add_message(platform="console", chat_id="c1", role="user", sender_id="u", text="new")
    storage.close()


def test_bot_py_migrate_command(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("storage:\n  url: sqlite:///data/x.db\n")
    run = [sys.executable, str(ROOT / "bot.py"), "migrate", "--config", str(cfg)]
    first = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert f"empty -> {schema.head()}" in first.stdout
    second = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert "nothing to run" in second.stdout


def test_head_from_the_revision_files_is_alembics_head():
    """`schema.head()` reads the revision files without Alembic; it must name Alembic's head."""
    assert schema.head() == schema._script().get_current_head()


def test_a_database_at_the_head_starts_without_importing_alembic(tmp_path):
    """The second start of a migrated database answers from one plain query (no Alembic)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Storage(url).migrate()
    code = (
        "import sys; from chatfn.storage.db import Storage; s = Storage(sys.argv[1]); "
        "assert s.migrate().pending == []; s.close(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_messages_stored_twice_before_0008_are_kept_and_the_unique_key_is_built(db_url):
    """A database at 0007 holding an incoming message stored twice (a stale worker wrote it
    again): the upgrade keeps every row (the later copy's id gets `#dup<row id>`), builds the
    unique key, and from then on a second insert of that id is impossible."""
    storage = Storage(db_url)
    with storage.engine.begin() as conn:
        schema._run(conn, "upgrade", "0007")
    row = {
        "platform": "http",
        "chat_id": "c1",
        "is_group": False,
        "role": "user",
        "sender_id": "u",
        "sender_name": "",
        "text": "hello",
        "message_id": "m1",
        "created_at": datetime.now(UTC),
    }
    with storage.engine.begin() as conn:
        for _ in range(3):
            conn.execute(core_metadata.tables["messages"].insert(), row)
        bot_row = {**row, "role": "assistant", "message_id": "m1#0", "text": "hi"}
        conn.execute(core_metadata.tables["messages"].insert(), [bot_row, bot_row])
    storage.migrate()
    with storage.engine.connect() as conn:
        ids = conn.execute(text("SELECT id, message_id FROM messages ORDER BY id")).all()
    first = ids[0][0]
    assert [m for _, m in ids] == [
        "m1",
        f"m1#dup{first + 1}",
        f"m1#dup{first + 2}",
        "m1#0",
        "m1#0",
    ]
    with pytest.raises(IntegrityError), storage.engine.begin() as conn:
        conn.execute(core_metadata.tables["messages"].insert(), row)
    storage.close()
