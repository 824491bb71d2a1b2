"""A client that goes away mid-turn (the web page reloaded or its tab closed while a reply
streams) never cancels the turn (issue 34, item 4): the reply is finished and stored, its usage
row is an ordinary one (not a `CancelledError` with 0 tokens), the turn is recorded as
finished so no later start runs it again, and the reply waits in the outbox for the client's
next connection to /v1/events. Real aiohttp server and client, real SQLite."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from sqlalchemy import select

from chatfn.channels.http.channel import HttpChannel
from chatfn.storage.models import messages_table, outbox_table, usage_table
from chatfn.testing import ScriptedModel, TestBot, say
from providers.types import LLMResponse, Message, ModelCapabilities, StreamEvent, ToolDefinition
from tests.kit import until

FIRST, REST = "The first half, ", "and the second half."


class GatedStream(ScriptedModel):
    """Streams FIRST, waits for `gate`, then streams REST: the client leaves in between."""

    def __init__(self) -> None:
        super().__init__([say(FIRST + REST)], capabilities=ModelCapabilities(streaming=True))
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.cancelled = False

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        response: LLMResponse = await self.complete(messages, tools)
        yield StreamEvent(type="text", text=FIRST)
        self.waiting.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield StreamEvent(type="text", text=REST)
        yield StreamEvent(type="done", response=response)


def _rows(tb: TestBot, table, *columns):  # type: ignore[no-untyped-def]
    with tb.bot.storage.engine.connect() as conn:
        return list(conn.execute(select(*columns).order_by(table.c.id)))


async def _client_gone(channel: HttpChannel) -> None:
    """Until the server saw the client's connection close (aiohttp then cancels its handler)."""
    assert channel.web.running
    await until(
        lambda: not channel.web.main.connections,
        5,
        "the server did not see the client's connection close",
    )
    for _ in range(5):  # the handler's cancellation is delivered on the next loop turns
        await asyncio.sleep(0)


async def test_a_reply_whose_client_went_away_is_finished_stored_and_delivered_later(
    tmp_path: Path,
) -> None:
    model = GatedStream()
    tb = TestBot(tmp_path, model=model, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    body = {"chat_id": "private:ann", "sender_id": "ann", "text": "tell me"}
    try:
        async with aiohttp.ClientSession() as http:
            resp = await http.post(f"{base}/v1/messages/stream", json=body)
            async with asyncio.timeout(5):
                while b"event: text" not in await resp.content.readline():
                    pass
                await model.waiting.wait()
            resp.close()  # the page reloads: its request goes away mid-reply
            await _client_gone(channel)
            assert not model.cancelled, "the client going away cancelled the model request"
            model.gate.set()
            await until(lambda: not tb.bot._turns, 5, "the turn did not end")

            texts = _rows(tb, messages_table, messages_table.c.role, messages_table.c.text)
            assert [tuple(r) for r in texts] == [("user", "tell me"), ("assistant", FIRST + REST)]
            usage = _rows(
                tb,
                usage_table,
                usage_table.c.outcome,
                usage_table.c.prompt_tokens,
                usage_table.c.completion_tokens,
            )
            assert [tuple(r) for r in usage] == [("ok", 10, 5)]  # billed once, as answered
            since = datetime.now(UTC) - timedelta(minutes=10)
            storage = tb.bot.storage
            assert await storage.run(storage.cluster.unfinished, since) == []  # never re-run
            assert await tb.bot.resume() == 0
            states = _rows(tb, outbox_table, outbox_table.c.state)
            assert [r.state for r in states] == ["pending"]  # waiting for the client

            # The client's next connection gets it, like any message that waited.
            events = await http.get(f"{base}/v1/events")
            async with asyncio.timeout(5):
                while not (line := await events.content.readline()).startswith(b"data: "):
                    pass
            assert json.loads(line[6:]) == {
                "chat_id": "private:ann",
                "text": FIRST + REST,
                "at": None,
            }
            events.close()
            await until(
                lambda: (
                    [r.state for r in _rows(tb, outbox_table, outbox_table.c.state)]
                    == ["delivered"]
                ),
                5,
                "the reply was not marked delivered",
            )
    finally:
        model.gate.set()
        await channel.stop()
        await tb.aclose()
