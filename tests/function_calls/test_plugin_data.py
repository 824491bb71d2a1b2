"""Issue 37 §2: a plugin reaches the database through the tables it declared
(`plugin.database(host or ctx)`, function_calls/plugin_data.py), not the whole Storage: its
statements on its own tables run; one that names a core table or another plugin's (read,
written, joined, in a subquery) or is plain SQL is refused before it reaches the database.
The built-in reminders go through the same door (tests/function_calls/builtins)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, delete, insert, select, text

from chatfn.storage.models import messages_table
from chatfn.testing import TestBot
from function_calls import PluginDatabase, TableRefused, Tables

PLUGIN = textwrap.dedent(
    """
    from pydantic import BaseModel
    from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select
    from function_calls import FunctionResult, MessageContext, Plugin, Tables, tool_function

    metadata = MetaData()
    notes = Table(
        "notes_items", metadata,
        Column("id", Integer, primary_key=True), Column("text", String(200), nullable=False),
    )
    plugin = Plugin("notes", tables=Tables(metadata))


    class NoteArgs(BaseModel):
        text: str


    def _add(db, value):
        with db.begin() as conn:
            conn.execute(insert(notes).values(text=value))
        with db.connect() as conn:
            return conn.scalar(select(notes.c.text).order_by(notes.c.id.desc()).limit(1))


    @tool_function(description="Keep a note.")
    async def note_add(ctx: MessageContext, args: NoteArgs) -> FunctionResult:
        db = plugin.database(ctx)
        saved = await db.run(_add, db, args.text)
        return FunctionResult(messages=[f"kept: {saved}"])
    """
)


async def test_a_handler_writes_its_own_table_through_plugin_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.py"
    path.write_text(PLUGIN)
    tb = TestBot(tmp_path, plugins=[str(path)])
    try:
        assert await tb.send("/note_add text=milk") == ["kept: milk"]
    finally:
        await tb.aclose()


async def test_statements_on_other_tables_are_refused(tmp_path: Path) -> None:
    mine, theirs = MetaData(), MetaData()
    notes = Table(
        "notes_items", mine, Column("id", Integer, primary_key=True), Column("body", String)
    )
    other = Table("other_rows", theirs, Column("id", Integer, primary_key=True))
    tb = TestBot(tmp_path)
    try:
        storage = tb.bot.storage
        await storage.run(Tables(mine).ensure, storage.engine, "notes")
        await storage.run(Tables(theirs).ensure, storage.engine, "other")
        db = PluginDatabase(storage, "notes", Tables(mine))

        def own() -> list[str]:
            with db.begin() as conn:
                conn.execute(insert(notes).values(body="a"))
                conn.execute(delete(notes).where(notes.c.body == "zzz"))
            with db.connect() as conn:
                return [r.body for r in conn.execute(select(notes))]

        assert await db.run(own) == ["a"]

        refused = [
            select(messages_table.c.text),  # the bot's history
            insert(other).values(id=1),  # another plugin's table, written
            select(notes).join(messages_table, messages_table.c.id == notes.c.id),
            select(notes).where(notes.c.id.in_(select(other.c.id))),  # in a subquery
            select(messages_table.alias("m")),  # behind an alias
            text("SELECT text FROM messages"),  # plain SQL: could name anything
            "DELETE FROM messages",
        ]
        for statement in refused:

            def run(s: object = statement) -> None:
                with db.connect() as conn:
                    conn.execute(s)

            with pytest.raises(TableRefused):
                await db.run(run)

        def count() -> int:
            with storage.engine.connect() as conn:
                return len(conn.execute(select(other)).all())

        assert await storage.run(count) == 0  # the refused insert never reached the database
    finally:
        await tb.aclose()


async def test_declared_on_demand_tables_are_made_through_typed_doors(tmp_path: Path) -> None:
    """A virtual table (FTS5) a `MetaData` cannot create: declared in `on_demand`, made with
    `create_virtual`, searched with Core (`MATCH` as an operator), dropped with `drop`; the
    same doors refuse a table the plugin did not declare, and a `temp.` table is declared by
    its full name."""
    from sqlalchemy import func

    from function_calls import Fts5, Fts5Vocab

    mine, virtual = MetaData(), MetaData()
    Table("notes_items", mine, Column("id", Integer, primary_key=True))
    fts = Table("notes_fts", virtual, Column("rowid", Integer), Column("body", String))
    vocab = Table("notes_vocab", virtual, Column("term", String), Column("doc", Integer))
    scratch = Table("notes_scratch", virtual, Column("w", String), schema="temp")
    undeclared = Table("notes_other", MetaData(), Column("body", String))
    tables = Tables(mine, on_demand=[fts, vocab, scratch])
    assert tables.names() == {"notes_items", "notes_fts", "notes_vocab", "temp.notes_scratch"}
    tb = TestBot(tmp_path)
    try:
        storage = tb.bot.storage
        await storage.run(tables.ensure, storage.engine, "notes")
        db = PluginDatabase(storage, "notes", tables)

        def index_and_search() -> list[tuple[int, int]]:
            with db.begin() as conn:
                conn.create_virtual(fts, Fts5(("body",), tokenize="porter"))
                conn.create_virtual(vocab, Fts5Vocab(fts, "row"))
                conn.create_virtual(scratch, Fts5(("w",)))
                conn.execute(
                    insert(fts), [{"rowid": 1, "body": "milk"}, {"rowid": 2, "body": "tea"}]
                )
                conn.execute(insert(scratch).values(w="x"))
            with db.connect() as conn:
                found = conn.execute(
                    select(fts.c.rowid, func.count()).where(fts.c.body.op("MATCH")("milk"))
                ).all()
                assert conn.execute(select(vocab.c.doc).where(vocab.c.term == "tea")).scalar() == 1
            with db.begin() as conn:
                conn.drop(fts)
            return [(r[0], r[1]) for r in found]

        assert await db.run(index_and_search) == [(1, 1)]
        refused = [
            lambda c: c.create_virtual(undeclared, Fts5(("body",))),
            lambda c: c.create_virtual(vocab, Fts5Vocab(undeclared)),
            lambda c: c.drop(messages_table),
            lambda c: c.create(messages_table),
            lambda c: c.execute(select(Table("notes_scratch", MetaData(), Column("w", String)))),
        ]
        for attempt in refused:

            def run(a: object = attempt) -> None:
                with db.begin() as conn:
                    a(conn)  # type: ignore[operator]

            with pytest.raises(TableRefused):
                await db.run(run)

        def still_there() -> int:
            with storage.engine.connect() as conn:
                return len(conn.execute(select(messages_table.c.id)).all())

        assert await storage.run(still_there) == 0  # messages was neither dropped nor touched
    finally:
        await tb.aclose()
