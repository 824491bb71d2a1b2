"""`chatfn replay` (issue 40.5) on a chat recorded by a real bot: two models on a local
OpenAI-compatible server choose different tools on the same turns; the report (JSON and HTML)
shows them side by side, a function with effects is never run again (its recorded result is
fed back), a `pure=True` one is, and nothing reaches any chat or the bot's records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from sqlalchemy import create_engine, func, select, update

from chatfn.cli import main
from chatfn.storage.models import (
    messages_table,
    outbox_table,
    tool_calls_table,
    usage_table,
)
from chatfn.testing import ScriptedModel, TestBot, call, say
from tests.fakes.choosing_openai import ChoosingOpenAI

PLUGIN = '''
from pathlib import Path
from pydantic import BaseModel
from function_calls import FunctionResult, tool_function

LOG = Path({log!r})


def note(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as f:
        f.write(line + "\\n")


class Booking(BaseModel):
    day: str


@tool_function()
def book_table(ctx, args: Booking) -> FunctionResult:
    """Book a table for a day (an effect: the booking is made)."""
    note(f"book {{args.day}}")
    return FunctionResult(llm_content=f"booked for {{args.day}}, ref B-17")


class Dish(BaseModel):
    dish: str


@tool_function(admin_only=True)
def wipe_bookings(ctx) -> FunctionResult:
    """Cancel every booking (admins only)."""
    note("wipe")
    return FunctionResult(llm_content="wiped")


@tool_function(pure=True)
def opening_hours(ctx) -> FunctionResult:
    """When the restaurant is open (it answers the chat itself)."""
    note("hours")
    return FunctionResult(messages=["Open 12-23 every day."])


@tool_function(pure=True)
def menu_price(ctx, args: Dish) -> FunctionResult:
    """The price of a dish on the menu."""
    note(f"price {{args.dish}}")
    return FunctionResult(llm_content=f"<{{args.dish}}> costs 12")
'''

PRICE = {"input": 2.0, "output": 4.0}


class Recorded:
    def __init__(self, folder: Path, fake: ChoosingOpenAI) -> None:
        self.folder = folder
        self.log = folder / "calls.log"
        self.db = folder / "bot.db"
        self.fake = fake
        plugin = folder / "restaurant.py"
        plugin.write_text(PLUGIN.format(log=str(self.log)), encoding="utf-8")
        self.config: dict[str, Any] = {
            "storage": {"url": f"sqlite:///{self.db}"},
            "plugins": {"paths": [str(plugin)]},
            "bot": {"model": "main", "timezone": "UTC"},
            "personas": {"pirate": "You are a pirate. Say arr."},
            "models": {
                name: {
                    "provider": "openai",
                    "model": name,
                    "base_url": fake.url,
                    "api_key": "k",
                    "max_retries": 0,
                    "price": PRICE,
                }
                for name in ("main", "fake-a", "fake-b", "fake-c", "fake-d")
            },
        }
        self.file = folder / "config.yaml"
        self.file.write_text(yaml.safe_dump(self.config), encoding="utf-8")

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def counts(self) -> dict[str, int]:
        engine = create_engine(f"sqlite:///{self.db}")
        try:
            with engine.connect() as conn:
                return {
                    t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                    for t in (messages_table, tool_calls_table, usage_table, outbox_table)
                }
        finally:
            engine.dispose()

    def outbox_pruned_and_reply_late(self, text: str) -> None:
        """The outbox rows gone (`storage.outbox.retention`), and the reply `text` stored
        after a later message of its chat (chatter that came in while its turn ran)."""
        engine = create_engine(f"sqlite:///{self.db}")
        try:
            with engine.begin() as conn:
                conn.execute(outbox_table.delete())
                conn.execute(
                    update(messages_table).where(messages_table.c.text == text).values(id=1000)
                )
        finally:
            engine.dispose()

    def age(self, text: str, when: datetime) -> None:
        """Move the message `text` (and the rows of its turn) back to `when`."""
        engine = create_engine(f"sqlite:///{self.db}")
        try:
            with engine.begin() as conn:
                conn.execute(
                    update(messages_table)
                    .where(messages_table.c.text == text)
                    .values(created_at=when)
                )
        finally:
            engine.dispose()

    async def replay(self, *args: str) -> tuple[int, dict[str, Any], Path]:
        out = self.folder / f"report{len(list(self.folder.glob('report*')))}"
        argv = ["replay", "--config", str(self.file), "--out", str(out), *args]
        code = await asyncio.to_thread(main, argv)
        data = json.loads((out / "replay.json").read_text(encoding="utf-8")) if code == 0 else {}
        return code, data, out


@pytest_asyncio.fixture
async def recorded(tmp_path: Path) -> AsyncIterator[Recorded]:
    """A bot that answered four turns in three chats (its model scripted), then stopped."""
    fake = await ChoosingOpenAI(
        {
            "fake-a": ("book_table", {"day": "friday"}),
            "fake-b": ("menu_price", {"dish": "soup"}),
            "fake-c": ("wipe_bookings", {}),
            "fake-d": ("opening_hours", {}),
        },
        insist=("fake-c",),
    ).start()
    rec = Recorded(tmp_path, fake)
    script = ScriptedModel(
        [
            call("book_table", day="friday"),
            say("Booked for friday (B-17)."),
            say("Soup and bread."),
            say("hi alice"),
            call("book_table", day="saturday"),
            say("Booked saturday."),
        ],
        name="main",
    )
    tb = TestBot(tmp_path, model=script, config=rec.config, builtins=False)
    await tb.send("book a table for friday", sender="bob", group="g1", at_bot=True)
    await tb.send("what is on the menu?", sender="bob", group="g1", at_bot=True)
    await tb.send("nice place", sender="dan", group="g1")  # not addressed: context only
    await tb.send("hello", sender="alice")
    await tb.send("book saturday", sender="carl", group="g2", at_bot=True)
    await tb.aclose()
    assert rec.lines() == ["book friday", "book saturday"]
    yield rec
    await fake.stop()


async def test_two_models_that_choose_different_tools(recorded: Recorded) -> None:
    before = recorded.counts()
    code, data, out = await recorded.replay(
        "--chats", "test:g*", "--since", "2020-01-01", "--model", "fake-a", "--against", "fake-b"
    )
    assert code == 0
    run = data["replay"]
    assert (run["chats"], run["model"], run["against"], run["limit"]) == (
        "test:g*",
        "fake-a",
        "fake-b",
        50,
    )
    turns = data["turns"]
    assert [t["message"]["text"] for t in turns] == [
        "book a table for friday",
        "what is on the menu?",
        "book saturday",
    ]
    first = turns[0]
    assert first["message"]["chat"] == "test:g1"
    a, b = first["model"], first["against"]
    assert a["tools"] == ["book_table"] and b["tools"] == ["menu_price"]
    # The booking has effects: its recorded result fed back, never run again.
    assert a["calls"][0]["how"] == "recorded"
    assert a["calls"][0]["arguments"] == {"day": "friday"}
    assert a["calls"][0]["result"] == "booked for friday, ref B-17"
    assert a["answer"] == "fake-a says booked for friday, ref B-17"
    # The price is pure: it ran.
    assert b["calls"][0] == {
        "function": "menu_price",
        "arguments": {"dish": "soup"},
        "how": "ran",
        "outcome": "ok",
        "result": "<soup> costs 12",
    }
    assert b["answer"] == "fake-b says <soup> costs 12"
    assert set(first["differs"]) == {"tools", "answer"}
    # Tokens and cost per side: two requests of 100 + 10 at 2 and 4 per million.
    assert a["tokens"] == {"prompt": 200, "completion": 20} and a["rounds"] == 2
    assert a["cost"] == pytest.approx((200 * 2 + 20 * 4) / 1e6)
    # The menu turn recorded no booking: fake-a's is not run and it is told so.
    second = turns[1]["model"]["calls"][0]
    assert (second["function"], second["how"], second["outcome"]) == (
        "book_table",
        "not_run",
        "not_run",
    )
    assert "not run" in second["result"]
    # Saturday's turn recorded a booking for saturday; fake-a asks for friday: the recorded
    # result is the nearest there is, both argument sets in the report.
    third = turns[2]["model"]["calls"][0]
    assert third["how"] == "recorded" and third["result"] == "booked for saturday, ref B-17"
    total = data["summary"]
    assert total["turns"] == 3 and total["differ"] == 3 and total["same"] == 0
    assert total["by_aspect"]["tools"] == 3
    assert total["model"]["tools"] == {"book_table": 3}
    assert total["against"]["tools"] == {"menu_price": 3}
    assert total["model"]["calls_not_run"] == 1 and total["against"]["calls_ran"] == 3
    assert total["model"]["tokens"] == {"prompt": 600, "completion": 60}
    assert total["differences"][0].startswith("test:g1 ")
    # Effects never ran again; the pure function ran once per turn.
    assert recorded.lines() == ["book friday", "book saturday"] + ["price soup"] * 3
    # Nothing was sent or recorded: no message, outbox row, audit row or usage row.
    assert recorded.counts() == before
    page = (out / "replay.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "Nothing was sent to any chat" in page
    assert "&lt;soup&gt; costs 12" in page and "<soup>" not in page
    # The models saw the conversation as the bot built it then: its history, the tools.
    seen = recorded.fake.requests[2]  # fake-b's first request on turn 1 (a asked twice)
    assert {"book_table", "menu_price"} <= {t["function"]["name"] for t in seen["tools"]}
    assert "book a table for friday" in seen["messages"][-1]["content"]


async def test_against_the_recorded_answers_with_since_and_limit(recorded: Recorded) -> None:
    recorded.age("book a table for friday", datetime(2020, 6, 1, 10, tzinfo=UTC))
    code, data, _ = await recorded.replay(
        "--chats", "test:g1", "--since", "2024-01-01", "--model", "fake-b"
    )
    assert code == 0
    assert data["replay"]["against"] == "recorded"
    [turn] = data["turns"]  # the friday turn is older than --since; g2 is not test:g1
    assert turn["message"]["text"] == "what is on the menu?"
    then = turn["against"]
    assert then["live"] is False and then["model"] == "main"
    assert then["tools"] == [] and then["answer"] == "Soup and bread."
    assert turn["model"]["tools"] == ["menu_price"]
    assert "tools" in turn["differs"]

    # Without its outbox rows, the answer is read from the history, chatter passed over.
    recorded.outbox_pruned_and_reply_late("Soup and bread.")
    code, data, _ = await recorded.replay(
        "--chats", "test:g1", "--since", "2024-01-01", "--model", "fake-b"
    )
    assert code == 0 and data["turns"][0]["against"]["answer"] == "Soup and bread."

    code, data, _ = await recorded.replay(
        "--chats", "test:*", "--since", "2020-01-01", "--model", "fake-a", "--limit", "2"
    )
    assert code == 0
    turns = data["turns"]
    assert [t["message"]["text"] for t in turns] == [
        "book a table for friday",
        "what is on the menu?",
    ]
    friday = turns[0]
    # Same function, same arguments as recorded: only the answer's words differ.
    assert friday["against"]["tools"] == ["book_table"]
    assert friday["against"]["calls"][0]["result"] == "booked for friday, ref B-17"
    assert friday["differs"] == ["answer"]
    # fake-b's price ran once in each of its two replays; no booking ran again.
    assert recorded.lines() == ["book friday", "book saturday", "price soup", "price soup"]

    asked = len(recorded.fake.requests)
    code, data, _ = await recorded.replay(
        "--chats",
        "test:private:*",
        "--since",
        "2020-01-01",
        "--model",
        "fake-b",
        "--against",
        "fake-a",
        "--persona",
        "pirate",
    )
    assert code == 0 and [t["message"]["text"] for t in data["turns"]] == ["hello"]
    assert data["replay"]["persona"] == "pirate"
    # The persona is the tried model's alone; the other is asked with the chat's prompt.
    sent = recorded.fake.requests[asked:]
    tried = next(r for r in sent if r["model"] == "fake-b")
    other = next(r for r in sent if r["model"] == "fake-a")
    assert tried["messages"][0]["content"].startswith("You are a pirate. Say arr.")
    assert "pirate" not in other["messages"][0]["content"]


async def test_refused_arguments(recorded: Recorded, capsys: pytest.CaptureFixture[str]) -> None:
    code, data, out = await recorded.replay(
        "--chats", "slack:*", "--since", "2020-01-01", "--model", "fake-a"
    )
    assert code == 0 and data["turns"] == [] and data["summary"]["turns"] == 0
    assert "0 turn(s), 0 differ" in (out / "replay.html").read_text(encoding="utf-8")
    assert recorded.fake.requests == []
    code, _, _ = await recorded.replay("--chats", "*", "--since", "2020-01-01", "--model", "nope")
    assert code == 2
    assert "model 'nope' is not a key of models:" in capsys.readouterr().err
    code, _, _ = await recorded.replay("--chats", "*", "--since", "last week", "--model", "fake-a")
    assert code == 2
    assert "--since 'last week'" in capsys.readouterr().err
    code, _, _ = await recorded.replay(
        "--chats", "*", "--since", "2020-01-01", "--model", "fake-a", "--persona", "clown"
    )
    assert code == 2
    assert "persona 'clown' is not a key of personas: (have: pirate)" in capsys.readouterr().err


async def test_a_call_the_chat_may_not_make_is_a_refusal(recorded: Recorded) -> None:
    """fake-c calls wipe_bookings, an admin-only function hidden from bob: refused as the
    bot would refuse it, listed among the turn's refusals, never run."""
    code, data, out = await recorded.replay(
        "--chats", "test:g1", "--since", "2020-01-01", "--model", "fake-c", "--limit", "1"
    )
    assert code == 0
    [turn] = data["turns"]
    call = turn["model"]["calls"][0]
    assert (call["function"], call["how"], call["outcome"]) == (
        "wipe_bookings",
        "refused",
        "refused",
    )
    assert turn["model"]["refusals"] == [f"wipe_bookings: {call['result']}"]
    assert turn["against"]["refusals"] == []
    assert "refusals" in turn["differs"]
    assert data["summary"]["model"]["refusals"] == 1
    assert data["summary"]["by_aspect"]["refusals"] == 1
    assert "wipe" not in recorded.lines()
    assert "refusals:" in (out / "replay.html").read_text(encoding="utf-8")


async def test_a_pure_function_that_answers_the_chat_ends_the_turn(recorded: Recorded) -> None:
    """As in the tool loop: a result with messages is the answer, no model round after it;
    the messages are in the report, not sent."""
    before = recorded.counts()
    code, data, _ = await recorded.replay(
        "--chats", "test:g2", "--since", "2020-01-01", "--model", "fake-d"
    )
    assert code == 0
    side = data["turns"][0]["model"]
    assert side["tools"] == ["opening_hours"] and side["calls"][0]["how"] == "ran"
    assert side["answer"] == "Open 12-23 every day." and side["rounds"] == 1
    assert recorded.lines()[-1] == "hours"
    assert recorded.counts() == before
