"""Commits per message (issue 27 §2), counted with engine events on a real SQLite file, with
limits, usage rows and the outbox on: a plain message is two commits (the incoming message with
its limit counts and the earlier messages' delivery marks; then the reply with its history and
outbox rows, the usage row, the counts and the handled mark), a tool turn one more per tool
round (the audit row with the round's usage row). Delivery marks ride on the next turn's write
or go on their own after `HOLD` seconds; a staged message never waits longer than that."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime import outbox as outbox_module
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.storage.models import handled_messages_table, limit_counters_table, outbox_table
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.factory import build_model
from tests.fakes.protocols import Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer
from tests.kit import until
from tests.runtime.functions import CityArgs, make_registry

LIMITS = {
    "per_user": {"messages_per_minute": 100, "model_calls_per_day": 100, "tokens_per_day": 10**6},
    "per_chat": {"messages_per_minute": 100},
}


def make_bot(tmp_path: Path, url: str | None = None, registry: Registry | None = None) -> Bot:
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'turn.db'}"},
        "plugins": {"paths": []},
        "limits": LIMITS,
    }
    settings = parse_settings(data, base_dir=tmp_path)
    model = build_model("main", model_config("openai", url, stream=False)) if url else None
    return Bot(settings, model=model, registry=registry, builtins=False, load_plugins=False)


async def read(bot: Bot, table: Any, *columns: str) -> list[tuple[Any, ...]]:
    """Rows of `table` (the named columns), read off the event loop like the bot's own reads."""

    def query() -> list[tuple[Any, ...]]:
        q = select(*(table.c[c] for c in columns)).order_by(*table.primary_key.columns)
        with bot.storage.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(q)]

    return await bot.storage.run(query)


async def states(bot: Bot) -> list[str]:
    return [s for (s,) in await read(bot, outbox_table, "state")]


class Commits:
    """Counts the commits of an engine (SQLAlchemy's `commit` event: one per transaction)."""

    def __init__(self, bot: Bot) -> None:
        self.n = 0
        event.listen(bot.storage.engine, "commit", self._one)

    def _one(self, _conn: Any) -> None:
        self.n += 1

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


async def _take(_out: OutgoingMessage) -> None:
    return None


def _msg(n: int, chat: str = "c1") -> IncomingMessage:
    return IncomingMessage(
        platform="test", chat_id=chat, sender_id="u", text=f"hello {n}", message_id=f"m{n}"
    )


async def test_a_plain_message_is_two_commits_and_its_mark_rides_on_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No mark goes on its own during the test, however slow the machine: the next turn takes it.
    monkeypatch.setattr(outbox_module, "HOLD", 60.0)
    async with RawReplayServer() as server:
        server.queue = list(
            replies("openai", [Turn(text="Hi."), Turn(text="Hi again.")], stream=False)
        )
        bot = make_bot(tmp_path, server.url)
        commits = Commits(bot)
        try:
            sent = await bot.handle(_msg(1), _take)
            assert [o.text for o in sent] == ["Hi."]
            assert commits.take() == 2  # message + counts; reply + usage + counts + handled
            assert await states(bot) == ["pending"]  # sent; its mark waits for a write
            sent = await bot.handle(_msg(2, "c2"), _take)  # another chat: any turn carries it
            assert commits.take() == 2
            assert (await states(bot))[0] == "delivered"
            handled = await read(bot, handled_messages_table, "message_id", "replies")
            assert handled == [("m1", 1), ("m2", 1)]
            counters = dict(
                ((s, m), v)
                for s, m, v in await read(bot, limit_counters_table, "scope", "metric", "value")
                if s == "user"
            )
            assert counters[("user", "messages")] == 2
            assert counters[("user", "model_calls")] == 2
            assert counters[("user", "tokens")] > 0
            await bot.outbox.flush_marks()  # what an idle HOLD later, or stop(), does
            assert await states(bot) == ["delivered", "delivered"]
            assert commits.take() == 1
        finally:
            await bot.aclose()


async def test_a_tool_turn_adds_one_commit_per_tool_round(tmp_path: Path) -> None:
    async with RawReplayServer() as server:
        turns = [
            Turn(calls=[("weather", {"city": "Oslo"})]),
            Turn(calls=[("weather", {"city": "Bergen"})]),
            Turn(text="Sunny in both."),
        ]
        server.queue = list(replies("openai", turns, stream=False))
        bot = make_bot(tmp_path, server.url, make_registry([]))
        commits = Commits(bot)
        try:
            sent = await bot.handle(_msg(1), _take)
            assert [o.text for o in sent] == ["Sunny in both."]
            # message; round 1 (audit row + usage 1); round 2 (audit row + usage 2); the end
            assert commits.take() == 4
            usage = await read(bot, bot_usage_table(), "model_name")
            assert len(usage) == 3
        finally:
            await bot.aclose()


def bot_usage_table() -> Any:
    from chatfn.storage.models import usage_table

    return usage_table


async def test_a_staged_message_waits_at_most_hold_seconds(tmp_path: Path) -> None:
    """A function that tells the user something and then works on: its message goes out
    after HOLD seconds in a write of its own, not when the turn ends."""
    reg = Registry()
    got: list[str] = []
    release = asyncio.Event()

    with reg.collecting():

        @tool_function(name="slow", description="Says it started, then works.")
        async def slow(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            await ctx.reply("working on it")
            await release.wait()
            return FunctionResult(llm_content="done")

    async def sink(out: OutgoingMessage) -> None:
        got.append(out.text)

    async with RawReplayServer() as server:
        turns = [Turn(calls=[("slow", {"city": "x"})]), Turn(text="Done.")]
        server.queue = list(replies("openai", turns, stream=False))
        bot = make_bot(tmp_path, server.url, reg)
        try:
            turn = asyncio.ensure_future(bot.handle(_msg(1), sink))
            await until(
                lambda: got == ["working on it"],
                outbox_module.HOLD + 3,
                "the staged message not sent",
            )
            assert not turn.done()
            release.set()
            await turn
            assert got == ["working on it", "Done."]
        finally:
            await bot.aclose()


async def test_a_turn_that_raises_still_stores_and_sends_what_it_staged(tmp_path: Path) -> None:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="boom", description="Says something, then fails.")
        async def boom(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            await ctx.reply("before the failure")
            raise asyncio.CancelledError  # not an ordinary error: the turn itself ends

    got: list[str] = []

    async def sink(out: OutgoingMessage) -> None:
        got.append(out.text)

    async with RawReplayServer() as server:
        server.queue = list(
            replies("openai", [Turn(calls=[("boom", {"city": "x"})])], stream=False)
        )
        bot = make_bot(tmp_path, server.url, reg)
        try:
            await asyncio.gather(bot.handle(_msg(1), sink), return_exceptions=True)
            assert got[:1] == ["before the failure"]
            await bot.outbox.flush_marks()
            assert (await states(bot))[:1] == ["delivered"]
        finally:
            await bot.aclose()


async def test_an_idle_mark_is_written_after_hold_seconds(tmp_path: Path) -> None:
    bot = make_bot(tmp_path)
    try:
        await bot.delivery.deliver(OutgoingMessage("test", "c1", "one"), _take)

        async def marked() -> bool:
            return await states(bot) == ["delivered"]

        await until(marked, outbox_module.HOLD + 5, "the idle mark was not written")
    finally:
        await bot.aclose()


async def test_stop_writes_the_waiting_marks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox_module, "HOLD", 60.0)
    bot = make_bot(tmp_path)
    await bot.delivery.deliver(OutgoingMessage("test", "c1", "one"), _take)
    assert await states(bot) == ["pending"]
    await bot.outbox.stop()
    assert await states(bot) == ["delivered"]
    await bot.aclose()


async def test_finish_twice_records_once(tmp_path: Path) -> None:
    from chatfn.storage.db import TurnWrite

    bot = make_bot(tmp_path)
    try:
        first = TurnWrite("test", "c1", handled=("m1", "w1", 1))
        await bot.storage.run(bot.storage.write_turn, first)
        second = TurnWrite("test", "c1", handled=("m1", "w2", 2))
        await bot.storage.run(bot.storage.write_turn, second)
        assert await read(bot, handled_messages_table, "message_id", "replies") == [("m1", 1)]
    finally:
        await bot.aclose()
