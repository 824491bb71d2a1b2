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
