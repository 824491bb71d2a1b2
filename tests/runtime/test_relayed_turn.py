"""A cluster worker's turn (`RelayedTurn`, chatfn/runtime/turn_writer.py), on a real SQLite file:
its
replies are written with the turn's own writes, keyed `<message id>#<position>`, and relayed
only after the write that stored them; the last write records the turn as finished in the
worker's name, so a plain message is two commits, as in one process (bench/README.md,
"Several processes"). A turn run again gets the rows the first run wrote; a turn cut short is
not recorded as finished; after a write that failed nothing more of the turn is relayed. The
gateway ends a request on a reply marked "done"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime import outbox as outbox_module
from chatfn.runtime.broker import encode_outgoing
from chatfn.runtime.cluster import Gateway, turn_key
from chatfn.runtime.turn_writer import RelayedTurn
from chatfn.storage.db import Storage, StorageError
from chatfn.storage.models import handled_messages_table, outbox_table
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from tests.fakes.protocols import Turn, replies
from tests.fakes.raw_replay import RawReplayServer
from tests.kit import until
from tests.runtime.functions import CityArgs
from tests.runtime.test_turn_end_write import Commits, make_bot, read


def _msg(n: int = 1) -> IncomingMessage:
    return IncomingMessage(
        platform="test", chat_id="c1", sender_id="u", text=f"hello {n}", message_id=f"m{n}"
    )


class Relayed:
    """The worker's side of a relayed turn: what was relayed, and how many commits the
    engine had made when it was (a message goes out only after its row is committed)."""

    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self.got: list[tuple[str, int, str, bool, int | None, int]] = []

    async def __call__(self, out: OutgoingMessage, seq: int, state: str, last: bool) -> None:
        self.got.append((out.text, seq, state, last, out.event_id, self.commits.n))

    def turn(self, message_id: str = "m1") -> RelayedTurn:
        return RelayedTurn(message_id, "worker-a", self)


async def _worker_bot(tmp_path: Path, url: str | None, registry: Registry | None = None) -> Any:
    bot = make_bot(tmp_path, url, registry)

    async def relay(out: OutgoingMessage, sink: Any) -> None:  # a message outside a turn
        raise AssertionError(f"{out.text!r} took the switch's relay, not the turn's writes")

    bot.switch.relay = relay
    return bot


async def test_a_relayed_turn_is_two_commits_keyed_and_relayed_after_its_write(
    tmp_path: Path,
) -> None:
    async with RawReplayServer() as server:
        server.queue = list(replies("openai", [Turn(text="Hi."), Turn(text="Hi.")], stream=False))
        bot = await _worker_bot(tmp_path, server.url)
        commits = Commits(bot)
        relayed = Relayed(commits)
        try:
            await bot.handle_here(_msg(), relayed=relayed.turn())
            assert commits.take() == 2  # the message; the reply with its handled mark
            [(text, seq, state, last, event_id, committed)] = relayed.got
            assert (text, seq, state, last) == ("Hi.", 0, "pending", True)
            assert committed == 2  # relayed after the write that stored it
            assert await read(bot, outbox_table, "id", "key", "state") == [
                (event_id, "m1#0", "pending")
            ]
            handled = await read(bot, handled_messages_table, "message_id", "worker", "replies")
            assert handled == [("m1", "worker-a", 1)]
            store = bot.storage.cluster
            owed = await bot.storage.run(store.owed, "test", "c1", "m1", 1)
            assert [(seq, e.id) for seq, e in owed] == [(0, event_id)]

            # Delivered by the gateway, then the turn runs again (a redelivery): its reply
            # keeps its one row and event id, relayed as finished (the gateway only counts it).
            await bot.storage.run(bot.storage.outbox.mark_delivered, [event_id])
            assert await bot.storage.run(store.owed, "test", "c1", "m1", 1) == []
            again = Relayed(commits)
            await bot.handle_here(_msg(), relayed=again.turn())
            assert [g[:5] for g in again.got] == [("Hi.", 0, "delivered", True, event_id)]
            assert len(await read(bot, outbox_table, "id")) == 1
            assert len(await read(bot, handled_messages_table, "message_id")) == 1
        finally:
            await bot.aclose()


async def test_a_relayed_turn_cut_short_is_not_recorded_as_finished(tmp_path: Path) -> None:
    """A worker's turn cancelled mid-way (its broker channel closed): what it staged is stored
    and relayed, and no handled mark is written, so the redelivery runs the turn again."""
    reg = Registry()
    with reg.collecting():

        @tool_function(name="boom", description="Says something, then the turn is cancelled.")
        async def boom(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            await ctx.reply("before the cut")
            raise asyncio.CancelledError

    async with RawReplayServer() as server:
        server.queue = list(
            replies("openai", [Turn(calls=[("boom", {"city": "x"})])], stream=False)
        )
        bot = await _worker_bot(tmp_path, server.url, reg)
        relayed = Relayed(Commits(bot))
        try:
            with pytest.raises(asyncio.CancelledError):
                await bot.handle_here(_msg(), relayed=relayed.turn())
            assert [g[:4] for g in relayed.got] == [("before the cut", 0, "pending", False)]
            assert await read(bot, handled_messages_table, "message_id") == []
        finally:
            await bot.aclose()


async def test_after_a_failed_write_nothing_of_the_turn_is_relayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox_module, "HOLD", 60.0)
    reg = Registry()
    with reg.collecting():

        @tool_function(name="note", description="Tells the user, then lets the model answer.")
        async def note(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            await ctx.reply("noted")
            return FunctionResult(llm_content="noted")

    turns = [Turn(calls=[("note", {"city": "x"})]), Turn(text="Anything else?")]
    async with RawReplayServer() as server:
        server.queue = list(replies("openai", turns, stream=False))
        bot = await _worker_bot(tmp_path, server.url, reg)
        relayed = Relayed(Commits(bot))

        def refuse(batch: Any) -> Any:
            raise StorageError("write_turn: the database is away")

        monkeypatch.setattr(Storage, "write_turn", lambda self, batch: refuse(batch))
        turn = relayed.turn()
        try:
            await bot.handle_here(_msg(), relayed=turn)
            assert turn.failed
            assert relayed.got == []  # neither "noted" (unstored) nor the answer after it
            assert await read(bot, outbox_table, "id") == []
            assert await read(bot, handled_messages_table, "message_id") == []
        finally:
            await bot.aclose()


async def test_the_gateway_ends_a_request_on_a_reply_marked_done(tmp_path: Path) -> None:
    bot = make_bot(tmp_path)
    published: list[dict[str, Any]] = []

    async def publish_incoming(platform: str, chat_id: str, body: dict[str, Any]) -> None:
        published.append(body)

    broker = SimpleNamespace(
        settings=SimpleNamespace(redelivery_timeout=30.0), publish_incoming=publish_incoming
    )
    gateway = Gateway(bot, broker, "gw-1")  # type: ignore[arg-type]
    got: list[str] = []
    stored: list[str] = []  # on_stored: the message is in the broker, a channel may confirm it

    async def sink(out: OutgoingMessage) -> None:
        got.append(out.text)

    try:
        request = asyncio.ensure_future(
            gateway.handle(_msg(), sink, None, lambda: stored.append("stored"))
        )
        await until(lambda: published, 5, "the turn was not published")
        assert published[0]["done_in_reply"] is True
        await asyncio.sleep(0)
        assert stored == ["stored"] and not request.done()  # before any worker answered
        key = turn_key("test", "c1", "m1")
        for seq, text in enumerate(["one", "two"]):
            out = OutgoingMessage("test", "c1", text)
            body = {"kind": "out", "source": key, "seq": seq, "out": encode_outgoing(out)}
            body["finished"] = False
            if seq == 1:
                body["done"] = True
            await gateway._on_reply(body)
            await asyncio.sleep(0.05)  # the request's task runs, if it was woken
            assert request.done() == (seq == 1)
        sent = await request
        assert [o.text for o in sent] == got == ["one", "two"]

        async def broker_down(platform: str, chat_id: str, body: dict[str, Any]) -> None:
            raise ConnectionError("the broker is away")

        broker.publish_incoming = broker_down
        with pytest.raises(ConnectionError):
            await gateway.handle(_msg(), sink, None, lambda: stored.append("again"))
        assert stored == ["stored"]  # not in the broker: not to be confirmed
    finally:
        await bot.aclose()
