"""One turn's writes in a process that answers its chats itself (`Bot.handle`): the messages it
sends are staged, and written with what the turn writes next anyway, so a plain message costs
two commits (the incoming message, `Storage.begin_turn`; then the reply with its history and
outbox rows, the usage rows and the handled mark) and a tool turn one more per tool round (the
audit row). Delivery marks of earlier messages, any chat's, ride along (chatfn/runtime/outbox.py).

A staged message is sent only after its rows are committed: "stored before it is sent" holds
as before. It waits at most `HOLD` seconds for the turn's next write (a function that says
"working on it" and then runs for a minute gets its message out after HOLD, in a write of its
own). When a write fails the messages are sent anyway, without an event id, and logged, as
`Outbox.write` does.

A cluster worker's turn (`RelayedTurn`, chatfn/runtime/cluster.py) is written the same way: its
messages are keyed `<message id>#<position>` (a turn run again after its worker died gets the
rows the first run wrote), its end write records it as finished in the worker's name, and
after each write its messages go to `RelayedTurn.relay` (the gateway, through the broker)
instead of this process's channels. A write that fails there sends nothing, then or later in
the turn (`RelayedTurn.failed`): the worker tells the user the turn was not stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from loguru import logger

from chatfn.common.messages import OutgoingMessage
from chatfn.common.metrics import Metrics
from chatfn.runtime.outbox import HOLD, Outbox
from chatfn.storage.db import Storage, StorageError, TurnWrite
from function_calls.journal import TurnJournal

ReplySink = Callable[[OutgoingMessage], Awaitable[None]]


class _Delivery(Protocol):
    """What a TurnWriter uses of the bot's Delivery (chatfn/runtime/delivery.py)."""

    metrics: Metrics
    outbox: Outbox

    async def pass_on(self, out: OutgoingMessage, sink: ReplySink | None = None) -> None: ...


# (message, its position in the turn, its row's state, written by the turn's last write)
Relay = Callable[[OutgoingMessage, int, str, bool], Awaitable[None]]


@dataclass(slots=True)
class RelayedTurn:
    """How a cluster worker's turn is written and sent (module docstring)."""

    message_id: str  # the incoming message's platform id: the key of the turn's rows
    worker: str  # named in the turn's handled mark
    relay: Relay  # after each write, each message it stored, in order
    failed: bool = False  # a write of the turn failed: nothing more of it is stored or sent
    count: int = 0  # messages of the turn staged so far (the next one's position)


class TurnWriter(TurnJournal):
    def __init__(
        self,
        storage: Storage,
        bot: _Delivery,
        platform: str,
        chat_id: str,
        relayed: RelayedTurn | None = None,
    ) -> None:
        super().__init__(storage, platform, chat_id)
        self.bot = bot
        self.relayed = relayed
        self.staged: list[tuple[OutgoingMessage, ReplySink | None]] = []
        self._in_batch: list[tuple[OutgoingMessage, ReplySink | None]] = []
        self._marks: list[int] = []
        self._first = 0  # a relayed turn's position of the first message in the batch
        self._timer: asyncio.TimerHandle | None = None

    def stage(self, out: OutgoingMessage, sink: ReplySink | None) -> None:
        """`out` goes out after the turn's next write (at most HOLD seconds from now)."""
        relayed = self.relayed
        if relayed is not None:
            if relayed.failed:  # after an unstored message nothing of the turn goes out
                return
            relayed.count += 1
        self.bot.metrics.messages_out.labels(out.platform).inc()
        self.staged.append((out, sink))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(HOLD, self._flush)

    def _flush(self) -> None:
        self._timer = None
        if self.staged:
            write = asyncio.ensure_future(self._write_quietly())
            self.bot.outbox._track(write)

    async def _write_quietly(self) -> None:
        try:
            await self.write()
        except StorageError:
            pass  # logged by `_written`; the messages went out without an event id

    def _collect(self, batch: TurnWrite) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._in_batch, self.staged = self.staged, []
        outbox = self.bot.outbox
        relayed = self.relayed
        if relayed is None:
            batch.outgoing = [outbox.stage_row(out) for out, _ in self._in_batch]
        else:
            self._first = first = relayed.count - len(self._in_batch)
            batch.outgoing = [
                outbox.stage_row(out, f"{relayed.message_id}#{first + i}")
                for i, (out, _) in enumerate(self._in_batch)
            ]
        self._marks = batch.delivered = outbox.take_marks()

    async def _written(self, batch: TurnWrite, ids: list[tuple[int, str]] | None) -> None:
        self.bot.outbox.marks_written(self._marks, ids is not None)
        sending, self._in_batch = self._in_batch, []
        if self.relayed is not None:
            await self._relay(sending, ids, batch.handled is not None)
            return
        if ids is None and sending:
            logger.error(
                "{} message(s) to {} {} not stored (sent anyway, without an event id)",
                len(sending),
                self.platform,
                self.chat_id,
            )
        for i, (out, sink) in enumerate(sending):
            if ids is not None:
                out.event_id = ids[i][0]
            try:
                await self.bot.pass_on(out, sink)
            except Exception as exc:  # one message's channel error must not stop the rest
                logger.opt(exception=exc).error("message to {} not sent", out.chat_id)

    async def _relay(
        self,
        sending: list[tuple[OutgoingMessage, ReplySink | None]],
        ids: list[tuple[int, str]] | None,
        last: bool,
    ) -> None:
        """A worker's messages after their write: relayed with their event ids, or, when the
        write failed, none of them nor any later one of the turn."""
        relayed = self.relayed
        assert relayed is not None
        if ids is None:
            relayed.failed = True
            return
        if relayed.failed:
            return
        for i, (out, _) in enumerate(sending):
            out.event_id, state = ids[i]
            await relayed.relay(out, self._first + i, state, last)
