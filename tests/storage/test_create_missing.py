"""`create_missing`: workers starting together on one new database create the same tables at
the same moment (the reminders' table, the knowledge vectors'); none of them may fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, inspect

from chatfn.storage.create_missing import create_missing
from function_calls.builtins.knowledge.vectors import kb_vectors, vector_metadata
from function_calls.builtins.reminders.service import reminder_metadata
from tests.storage.create_at_once import create_at_once


@pytest.mark.parametrize(
    "metadata", [reminder_metadata, vector_metadata], ids=["reminders", "vectors"]
)
def test_workers_creating_one_schema_at_once_on_sqlite(tmp_path: Path, metadata: MetaData) -> None:
    """With create_all's look-then-create (each CREATE commits on its own on SQLite) a worker
    finds another's table made between its look and its create: 'already exists'."""
    for round_ in range(5):
        url = f"sqlite:///{tmp_path / f'race{round_}.db'}"
        assert create_at_once(url, lambda engine: create_missing(engine, metadata)) == []
        engine = create_engine(url)
        have = set(inspect(engine).get_table_names())
        assert have == set(metadata.tables)
        indexes = {i["name"] for t in metadata.tables for i in inspect(engine).get_indexes(t)}
        engine.dispose()
        assert indexes == {i.name for t in metadata.tables.values() for i in t.indexes}


def test_a_second_call_changes_nothing_and_keeps_the_rows(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'again.db'}")
    create_missing(engine, vector_metadata)
    with engine.begin() as conn:
        conn.execute(kb_vectors.insert().values(chunk_id=7, base="docs", vector=bytes(8)))
    create_missing(engine, vector_metadata)
    with engine.connect() as conn:
        assert conn.execute(kb_vectors.select()).all() == [(7, "docs", bytes(8))]
    engine.dispose()
