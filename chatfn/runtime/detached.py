"""A turn its caller cannot cancel by going away (`ChannelHost.handle(..., detached=True)`).

aiohttp cancels a request's handler when its client disconnects (a web page reloaded or its
tab closed while a reply streams). Run inside that handler, the turn was cancelled with it: no
reply stored, a usage row saying `CancelledError` with 0 tokens, and the message run again at
the next start because its turn never finished. Here the turn runs in a task of its own, which
the caller awaits shielded: the caller's cancellation ends only the waiting. The turn goes on,
its stream events are dropped from then on, and its replies are refused by the caller's sink
(`NotDelivered`), so they wait in the outbox for the client's next connection like any message
(README, "Delivery"). The task is among the bot's turns, so a stop waits for it (or abandons
it) like any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

from chatfn.common.messages import NotDelivered, OutgoingMessage, StreamEvent, StreamObserver

ReplySink = Callable[[OutgoingMessage], Awaitable[None]]
Turn = Callable[[ReplySink | None, StreamObserver | None], Awaitable[list[OutgoingMessage]]]


class Caller:
    """The caller's sink and stream observer, until it goes away."""

    __slots__ = ("_on_stream", "_sink", "gone")

    def __init__(self, sink: ReplySink | None, on_stream: StreamObserver | None) -> None:
        self._sink = sink
        self._on_stream = on_stream
        self.gone = False

    async def sink(self, out: OutgoingMessage) -> None:
        if self.gone or self._sink is None:
            raise NotDelivered("the client that sent the message went away")
        await self._sink(out)

    async def on_stream(self, event: StreamEvent) -> None:
        if not self.gone and self._on_stream is not None:
            await self._on_stream(event)


def _log_failure(task: asyncio.Task[Any]) -> None:
    """A detached turn's error, which no caller is left to receive."""
    if not task.cancelled() and task.exception() is not None:
        logger.opt(exception=task.exception()).error("a turn whose client went away failed")


async def run_detached(
    turn: Turn,
    sink: ReplySink | None,
    on_stream: StreamObserver | None,
    tasks: set[asyncio.Task[Any]],
) -> list[OutgoingMessage]:
    """`turn(sink, on_stream)` in a task of its own (added to `tasks`, the bot's turns); what
    it sent, unless the caller is cancelled first (then the turn goes on without it)."""
    caller = Caller(sink, on_stream)

    async def whole_turn() -> list[OutgoingMessage]:  # a coroutine, as a task needs
        return await turn(
            caller.sink if sink is not None else None, caller.on_stream if on_stream else None
        )

    task = asyncio.create_task(whole_turn())
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():  # the turn itself was cancelled (the bot abandoned it at a stop)
            raise
        caller.gone = True
        task.add_done_callback(_log_failure)
        raise
