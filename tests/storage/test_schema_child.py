"""A bot's start migrates in a child process (chatfn/storage/schema_child.py): the schema ends
at the head on SQLite and PostgreSQL, a failed migration reads as it did in process, the
bot's process lock does not block the child, and a current database starts no child.

The pytest plugin makes bots in tests migrate in process; these tests turn that off."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from chatfn.runtime import process_lock
from chatfn.storage import schema, schema_child
from chatfn.storage.db import Storage, StorageError
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def apart():
    before = schema_child.in_process()
    schema_child.in_process(False)
    yield
    schema_child.in_process(before)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chatfn.db'}"
    return request.getfixturevalue("pg_url")


def test_an_empty_database_is_migrated_by_the_child_under_the_bots_lock(db_url):
    """The process lock `chatfn run` takes before building its Bot is held while the child
    migrates: neither waits for the other."""
    lock = process_lock.take(db_url)
    storage = Storage(db_url)
    try:
        assert not schema.at_head(storage.engine)
        storage.create_tables()
        assert storage.schema_state().current == schema.head()
        storage.add_message(platform="console", chat_id="c1", role="user", sender_id="u", text="x")
        assert [m.text for m in storage.recent_messages("console", "c1", 5)] == ["x"]
    finally:
        storage.close()
        lock.release()


def test_the_child_reports_the_state_it_found(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    before = schema_child.upgrade(url)
    assert before.current is None and not before.legacy and before.pending[0] == schema.BASELINE
    assert before.head == schema.head()
    again = schema_child.upgrade(url)
    assert again.pending == [] and again.current == schema.head()


def test_a_current_database_starts_no_child(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Storage(url).migrate()

    def no_child(url: str) -> schema.SchemaState:
        raise AssertionError("a child was started for a database at the head")

    monkeypatch.setattr(schema_child, "upgrade", no_child)
    storage = Storage(url)
    storage.create_tables()
    storage.close()


def test_a_failed_migration_reads_as_it_did_in_process(tmp_path):
    """A file that is not a database: the same StorageError, word for word, as when the
    migration ran in the bot's process."""
    path = tmp_path / "not-a-db.sqlite"
    path.write_bytes(b"this is not a database file, but it is long enough to be read" * 20)
    url = f"sqlite:///{path}"
    storage = Storage(url)
    with pytest.raises(StorageError) as in_process:
        storage.migrate()
    with pytest.raises(StorageError) as in_child:
        storage.create_tables()
    storage.close()
    assert str(in_child.value) == str(in_process.value)
    assert str(in_child.value).startswith(f"cannot migrate the database at {url}: ")
    assert "file is not a database" in str(in_child.value)


def test_a_failure_inside_the_migrations_comes_back_from_the_child(tmp_path):
    """A migration that fails midway (0002's `workers` table made by hand after 0001): the
    database's own error, word for word as in process on a database made the same way."""
    errors = []
    for where in ("child", "process"):
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        storage = Storage(url)
        with storage.engine.begin() as conn:
            schema._run(conn, "upgrade", "0001")
            conn.execute(text("CREATE TABLE workers (id INTEGER)"))
        with pytest.raises(StorageError) as failed:
            storage.create_tables() if where == "child" else storage.migrate()
        assert storage.schema_state().current == "0001"
        storage.close()
        errors.append(str(failed.value))
        (tmp_path / "db.sqlite").unlink()
    assert "table workers already exists" in errors[0]
    assert errors[0] == errors[1]


def test_an_in_memory_database_migrates_in_process():
    """No other process can open it."""
    storage = Storage("sqlite://")
    storage.create_tables()
    assert storage.schema_state().current == schema.head()
    storage.close()


def test_a_child_that_dies_without_an_answer_says_what_to_run(tmp_path, monkeypatch):
    """A child killed or crashed before it could answer (here: a program that writes a line to
    stderr and exits 3): the error names its exit code and last line, and tells the operator to
    run the migrations in the foreground."""
    dying = tmp_path / "dying-python"
    dying.write_text("#!/bin/sh\necho 'Killed: out of memory' >&2\nexit 3\n")
    dying.chmod(0o755)
    url = f"sqlite:///{tmp_path / 'chatfn.db'}"
    storage = Storage(url)
    monkeypatch.setattr(schema_child.sys, "executable", str(dying))
    with pytest.raises(StorageError) as failed:
        storage.create_tables()
    storage.close()
    message = str(failed.value)
    assert message.startswith(f"cannot migrate the database at {url}: ")
    assert "exited with code 3: Killed: out of memory" in message
    assert message.endswith(
        "run `chatfn migrate` to run the migrations in the foreground and see why"
    )
