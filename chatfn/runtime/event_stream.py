"""The event stream as readers see it: the /v1/events clients and the webhook read the outbox's
rows in id order (chatfn/runtime/outbox.py writes them).

- `EventQueue`: what the bot publishes to a live reader; a reader that stalls never blocks it.
- `EventReader`: one reader's position, and the rule every reader follows for a missing id.
- `message_of`: a stored row as the message it carries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from loguru import logger

from chatfn.common.messages import OutgoingMessage
from chatfn.storage.outbox import PAYLOAD_FIELDS, OutboxEntry

POLL = 1.0  # seconds between looks at the table when nothing wakes a reader
Fetch = Callable[[int], Awaitable[list[OutboxEntry]]]


class EventQueue(asyncio.Queue[OutgoingMessage]):
    """A /v1/events subscriber's queue. A reader that stalls never blocks the bot: when the
    queue is full its oldest event makes room, and that event's id is noted in `dropped`, so
    the reader fetches it again from the outbox table instead of losing it."""

    def __init__(self, maxsize: int = 1000, *, wake_only: bool = False) -> None:
        super().__init__(maxsize)
        self.dropped: list[int] = []
        self.wake_only = wake_only  # a reader that only wants waking (it reads the table)

    def offer(self, out: OutgoingMessage) -> None:
        if self.full():
            old = self.get_nowait()
            if old.event_id is not None and not self.wake_only:
                if not self.dropped:
                    logger.warning("an event subscriber fell 1000 events behind: replaying")
                self.dropped.append(old.event_id)
        self.put_nowait(out)


def message_of(entry: OutboxEntry) -> OutgoingMessage:
    data = {k: entry.payload.get(k) for k in PAYLOAD_FIELDS}
    return OutgoingMessage(
        platform=entry.platform,
        chat_id=entry.chat_id,
        text=str(data["text"] or ""),
        is_group=bool(data["is_group"]),
        at=data["at"],
        reply_to=data["reply_to"],
        notice=bool(data["notice"]),
        images=[str(i) for i in data["images"] or []],
        audio=[str(a) for a in data["audio"] or []],
        buttons=[(str(b[0]), str(b[1])) for b in data["buttons"] or []],
        event_id=entry.id,
    )


class Gaps:
    """The ids the readers of this process saw missing, with when each was first seen (the
    wait for an id is counted once, however many readers meet it). The last 256 are kept."""

    def __init__(self) -> None:
        self._gaps: list[list[Any]] = []

    def seen(self, lo: int, hi: int, now: float) -> list[Any]:
        """[first id, last id, when first seen missing, logged] for the gap `lo`..`hi`."""
        for gap in self._gaps:
            if gap[0] <= lo <= gap[1]:
                return gap
        gap = [lo, hi, now, False]
        self._gaps.append(gap)
        del self._gaps[:-256]
        return gap


class EventReader:
    """One reader's position in the event stream (a /v1/events client, the webhook) and the
    rule they share for a missing id.

    Events are read after `last` in id order. With several processes writing (workers), commit
    order is not id order: an id can be missing because its row is still being committed while
    a higher one is visible. The events after a missing id are held back until it appears, or
    until it has been missing for `storage.outbox.gap_wait` seconds, counted from when a reader
    of this process first saw it missing, or from when the event above it was written if that
    is earlier (a client replaying old events crosses pruned rows and old gaps without waiting):
    then it is passed, since an id whose insert was rolled back never appears. An event that
    commits after its id was passed is not sent by a reader that passed it (its row is kept:
    `Last-Event-ID` from before it replays it)."""

    def __init__(self, fetch: Fetch, gaps: Gaps, gap_wait: float, last: int) -> None:
        self._fetch = fetch  # the rows after an id, in id order (Outbox.entries_since)
        self._gaps = gaps
        self._gap_wait = gap_wait
        self.last = last
        self.held = False  # events wait behind a missing id
        self._skip: set[int] = set()

    @property
    def poll(self) -> float:
        """Seconds until the next look: soon while a missing id holds events back."""
        return 0.2 if self.held else POLL

    async def read(self) -> list[OutgoingMessage]:
        """The events after `last` that may go now (see the class docstring), in id order. The
        caller delivers them and calls `advance` for each."""
        return self.ready(await self._fetch(self.last))

    def ready(self, entries: list[OutboxEntry]) -> list[OutgoingMessage]:
        """Of `entries` (rows in id order), the events that may go now."""
        now, wall = time.monotonic(), datetime.now(UTC)
        wait = self._gap_wait
        out: list[OutgoingMessage] = []
        last = self.last
        self.held = False
        for entry in entries:
            eid = entry.id
            if eid <= last:
                continue
            if eid > last + 1:
                gap = self._gaps.seen(last + 1, eid - 1, now)
                waited = max(now - gap[2], (wall - entry.created_at).total_seconds())
                if waited < wait:
                    self.held = True
                    break
                if not gap[3] and now - gap[2] > 0:  # waited for here: worth a line
                    gap[3] = True
                    logger.warning(
                        "event id {} missing for {:.1f} s (rolled back, or committed late): passed",
                        last + 1 if eid == last + 2 else f"{last + 1}..{eid - 1}",
                        waited,
                    )
            out.append(message_of(entry))
            last = eid
        return out

    def advance(self, event: OutgoingMessage) -> None:
        """`event` was delivered: the reader's position moves past it."""
        if event.event_id is not None and event.event_id > self.last:
            self.last = event.event_id
            self._skip.discard(event.event_id)

    def skip(self, event: OutgoingMessage) -> None:
        """`event` went out another way (a waiting message sent first): not again."""
        if event.event_id is not None and event.event_id > self.last:
            self._skip.add(event.event_id)

    def skipped(self, event: OutgoingMessage) -> bool:
        return event.event_id in self._skip
