"""The durable outbox: every message the bot sends is a row before any channel sees it, and
stays pending until a channel took it.

- `write` stores the row (and the history row, one transaction) and gives the message its
  event id; a database that stays locked past `storage.busy_retry` does not stop the message
  (it is sent without an id and the failure logged).
- `dispatch` hands a message without a waiting request to its channel. A channel that cannot
  take it now raises NotDelivered: the row stays pending and its chat gets a backlog, so later
  messages to that chat queue behind it instead of overtaking it.
- `run` drains pending rows (at start-up: what was owed before a restart; then on `kick()`,
  e.g. a OneBot account connecting, and every `POLL` seconds), expires rows older than
  `storage.outbox.max_wait` (logged and counted, never dropped silently) and prunes finished
  rows after `storage.outbox.retention`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from loguru import logger

from chatfn.common.config import OutboxSettings
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage, RateLimited
from chatfn.runtime.delivery_policy import DeliveryPolicy
from chatfn.runtime.event_stream import POLL, EventReader, Gaps, message_of
from chatfn.storage.db import Storage, StorageError
from chatfn.storage.outbox import PAYLOAD_FIELDS, OutboxEntry

# Seconds a delivery mark, or a message a turn staged (chatfn/runtime/turn_writer.py), waits for a
# write that happens anyway (the next turn's start or end, a tool-call row) before it is
# written on its own. A crash in that time leaves the row pending: at most a re-send of a
# message that went out, as for a crash before any mark (README, "Delivery").
HOLD = 0.2
_HOUSEKEEPING = 30.0
# Ids of waiting messages handed to a client that `Outbox` remembers (`_handed`).
HANDED_KEPT = 10_000
# Chats a drain pass starts sending to per pass of the event loop (`_drain_chats`).
DRAIN_SLICE = 20
R = TypeVar("R")


class _Sender(Protocol):
    """A channel. It may also have `find_sent(owed: list[tuple[OutgoingMessage, datetime]])
    -> dict[event id, bool]`: which rows owed from before this start it finds sent already
    (True), or not / cannot tell (False); rows it cannot check yet it leaves out."""

    async def send(self, message: OutgoingMessage) -> None: ...


def _log_failed_marks(ids: list[int], write: asyncio.Future[None]) -> None:
    if not write.cancelled() and write.exception() is not None:
        logger.error("outbox rows {} not marked delivered: {}", ids, write.exception())


class Outbox:
    def __init__(
        self,
        storage: Storage,
        settings: OutboxSettings,
        channels: Mapping[str, _Sender],
        history: Callable[..., dict[str, Any]],
    ) -> None:
        self.storage = storage
        self.settings = settings
        self.channels = channels
        self._history = history
        self._backlog: set[tuple[str, str]] = set()
        self._deferred: set[tuple[str, str]] = set()
        # The drain takes only rows owed from before start-up (id <= _boot_id) and rows this
        # process handed over (`_released`): a row `Bot.deliver` is still sending is never
        # picked up, or a message written a moment ago could be sent twice.
        self._boot_id = 0
        # Row id -> the release's number (`_release`): a drain pass takes only rows released
        # before its read of the table, since a row released after it (a live send that failed
        # after some parts went out, say) was read with the text the live send had started
        # from, and the parts sent would go out again.
        self._released: dict[int, int] = {}
        self._releases = 0
        # Rows owed from before start-up whose channel has said whether it sent them already
        # (`find_sent`): each is asked about once.
        self._checked: set[int] = set()
        self._marks: set[asyncio.Future[Any]] = set()
        # Waiting messages handed to one event-stream client (`take_waiting`, `hand_over`): no
        # other client, nor the drain, takes them while that client writes them or until their
        # delivery mark is in the database (it may wait for a turn's write, or a busy
        # database). The oldest are forgotten past HANDED_KEPT: long marked by then.
        self._handed: OrderedDict[int, None] = OrderedDict()
        # Delivery marks not written yet: the next write of any turn takes them (take_marks),
        # or, after HOLD seconds without one, a write of their own. Until then (and while
        # such a write is in flight) the drain leaves those rows alone (`_marking`).
        self._unmarked: list[int] = []
        self._marking: set[int] = set()
        self._mark_timer: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._once: asyncio.Future[None] | None = None
        self._draining = asyncio.Lock()
        # False in a worker without channels: it writes rows, its gateways deliver them.
        self.drains = True
        self.expired = 0  # messages that waited past max_wait (also logged)
        self._gaps = Gaps()  # the ids this process's readers saw missing
        self.delivered = 0
        self.failed = 0
        # How a send is tried again (chatfn/runtime/delivery_policy.py; the Delivery that owns
        # this outbox gives it the configuration's). Chats the policy holds back: (when they
        # are due, failures in a row, held for a rate limit); the drain leaves them until then.
        self.policy = DeliveryPolicy(max_wait=settings.max_wait)
        self._due: dict[tuple[str, str], tuple[float, int, bool]] = {}
        self._due_timer: asyncio.TimerHandle | None = None

    # -- writing -----------------------------------------------------------------------------
    async def write(
        self, out: OutgoingMessage, key: str | None = None, *, required: bool = False
    ) -> str:
        """Store `out` (outbox row + history row, one transaction) and set its event id.
        `key` (a worker's reply, `<message id>#<position>`) makes it idempotent: a turn run
        again gets the row written the first time. Returns the row's state ("pending" for a
        new row; "delivered" etc. when a keyed row was finished already). A row the database
        does not take is logged and the message sent anyway, without an event id; with
        `required` (a cluster worker's reply) StorageError is raised instead: not sent."""
        payload = {k: getattr(out, k) for k in PAYLOAD_FIELDS}
        history = self._history(out) if key is None else self._history(out, key)
        try:
            out.event_id, state = await self.storage.run(
                self.storage.outbox.add_keyed, out.platform, out.chat_id, payload, history, key
            )
        except StorageError as exc:
            if required:
                raise
            logger.error(
                "message to {} {} not stored (sent anyway, without an event id): {}",
                out.platform,
                out.chat_id,
                exc,
            )
            return "pending"
        return state

    @property
    def boot_id(self) -> int:
        """The last event id when this process started: rows up to it are its drain's (a
        gateway passing on a worker's message skips those: its drain sends them)."""
        return self._boot_id

    async def finish(self, out: OutgoingMessage, state: str, rest: str | None = None) -> None:
        if state == "delivered":
            self.delivered += 1
        elif state == "failed":
            self.failed += 1
        if out.event_id is None:
            return
        if state == "delivered" and rest is None:
            # Batched across turns: written with the next write that happens anyway.
            self._released.pop(out.event_id, None)
            self._unmarked.append(out.event_id)
            self._marking.add(out.event_id)
            if self._mark_timer is None:
                loop = asyncio.get_running_loop()
                self._mark_timer = loop.call_later(HOLD, self._write_marks)
            return
        # Shielded and tracked: a bot stopping right after a send still records it (`stop`
        # waits for these), or the next start would send the message again.
        mark = asyncio.ensure_future(
            self.storage.run(self.storage.outbox.mark, out.event_id, state, text=rest)
        )
        self._track(mark)
        try:
            await asyncio.shield(mark)
        except StorageError as exc:
            logger.error("outbox row {} not marked {}: {}", out.event_id, state, exc)
        if state != "pending":
            self._released.pop(out.event_id, None)

    def _release(self, event_id: int) -> None:
        """Hand row `event_id` to the drain (this process stopped sending it)."""
        self._releases += 1
        self._released[event_id] = self._releases

    def _track(self, write: asyncio.Future[Any]) -> None:
        self._marks.add(write)
        write.add_done_callback(self._marks.discard)

    # -- delivery marks, batched across turns ----------------------------------------------
    def take_marks(self) -> list[int]:
        """The delivery marks waiting to be written, now the caller's to write in its own
        transaction (`Storage.begin_turn` / `write_turn`); then `marks_written(ids, ok)`."""
        ids, self._unmarked = self._unmarked, []
        if self._mark_timer is not None:
            self._mark_timer.cancel()
            self._mark_timer = None
        return ids

    def marks_written(self, ids: list[int], ok: bool) -> None:
        """After the transaction that carried `ids`: done, or back in line for the next."""
        if ok:
            self._marking.difference_update(ids)
            return
        self._unmarked[:0] = ids
        if self._mark_timer is None and ids:
            self._mark_timer = asyncio.get_running_loop().call_later(HOLD, self._write_marks)

    def _write_marks(self) -> None:
        self._mark_timer = None
        ids = self.take_marks()
        if ids:
            self._track(asyncio.ensure_future(self._write_marks_now(ids)))

    async def _write_marks_now(self, ids: list[int]) -> None:
        try:
            await self.storage.run(self.storage.outbox.mark_delivered, ids)
        except StorageError as exc:
            logger.error("outbox rows {} not marked delivered yet: {}", ids, exc)
            self.marks_written(ids, False)
            return
        self.marks_written(ids, True)

    async def flush_marks(self) -> None:
        """Write the waiting delivery marks now and wait for every write in flight."""
        self._write_marks()
        if self._marks:
            await asyncio.wait(set(self._marks), timeout=self.storage.busy_retry + 1)

    def stage_row(
        self, out: OutgoingMessage, key: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any], str | None]:
        """(payload, history row, key) of `out` for a turn's own write (`TurnWrite`)."""
        payload = {k: getattr(out, k) for k in PAYLOAD_FIELDS}
        history = self._history(out) if key is None else self._history(out, key)
        return payload, history, key

    # -- sending -----------------------------------------------------------------------------
    async def dispatch(self, out: OutgoingMessage, failed: NotDelivered | None = None) -> None:
        """Send `out` through its platform's channel now, unless its chat has older messages
        waiting (then it waits behind them), or `failed` (why a first try did not take it)
        is one the delivery policy waits out. Raises DeliveryRefused when the platform refused
        it for good; a message that cannot go out now is kept, not raised."""
        key = (out.platform, out.chat_id)
        if failed is not None and out.event_id is not None and self._hold(key, failed):
            self._backlog.add(key)
            self._release(out.event_id)
            return
        if key in self._backlog and out.event_id is not None:
            self._deferred.add(key)
            self._release(out.event_id)
            self.kick()
            return
        try:
            await self._send(out, raise_refused=True)
        except asyncio.CancelledError:  # the sender was cancelled mid-send: the drain owns it
            if out.event_id is not None:
                self._release(out.event_id)
                self._backlog.add(key)
            raise

    async def _send(self, out: OutgoingMessage, *, raise_refused: bool) -> bool:
        key = (out.platform, out.chat_id)
        channel = self.channels.get(out.platform)
        try:
            if channel is None:
                raise NotDelivered(f"no {out.platform} channel is running")
            await channel.send(out)
        except NotDelivered as exc:
            if out.event_id is None:
                logger.error("message to {} lost: {} (and not stored)", out.chat_id, exc)
                return False
            if exc.rest is not None:
                await self.finish(out, "pending", rest=exc.rest)
            if key not in self._backlog:
                logger.warning(
                    "message {} to {} {} waits in the outbox: {}",
                    out.event_id,
                    out.platform,
                    out.chat_id,
                    exc,
                )
            self._backlog.add(key)
            self._hold(key, exc)
            self._release(out.event_id)
            return False
        except DeliveryRefused:
            await self.finish(out, "failed")
            if raise_refused:
                raise
            return True
        except Exception:
            await self.finish(out, "failed")
            raise
        if self._due:
            self._due.pop(key, None)
        await self.finish(out, "delivered")
        return True

    def _hold(self, key: tuple[str, str], failure: NotDelivered) -> bool:
        """Hold the chat `key` back after `failure` for as long as the delivery policy says
        (False: not held, it goes on the next pass or kick); the drain is woken then."""
        failures = self._due.get(key, (0.0, -1, False))[1] + 1
        delay = self.policy.retry_in(failure, failures)
        if delay is None:
            self._due.pop(key, None)
            return False
        due = time.monotonic() + delay
        self._due[key] = (due, failures, isinstance(failure, RateLimited))
        timer = self._due_timer
        if timer is None or timer.when() > asyncio.get_running_loop().time() + delay:
            if timer is not None:
                timer.cancel()
            self._due_timer = asyncio.get_running_loop().call_later(delay, self._due_now)
        return True

    def _due_now(self) -> None:
        self._due_timer = None
        self.kick()

    def kick(self) -> None:
        """Drain pending messages now (a channel just became able to send: chats held back
        for its failures go too, not those waiting out a rate limit). Before `start()` (a bot
        whose services are not started, as in some tests) one pass runs at once."""
        if self._due:
            self._due = {k: d for k, d in self._due.items() if d[2]}
        self._wake.set()
        if self._task is None and (self._once is None or self._once.done()):
            self._once = asyncio.ensure_future(self._drain_once())

    async def _drain_once(self) -> None:
        try:
            await self.drain()
        except Exception as exc:
            logger.warning("outbox round failed: {}", exc)

    # -- the drain loop ----------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._boot_id = await self.storage.run(self.storage.outbox.last_id)
            if not self.drains:
                return
            self._task = asyncio.create_task(self._run(), name="outbox")

    async def stop(self) -> None:
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        await self.flush_marks()
        if self._once is not None and not self._once.done():
            self._once.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # unlike `await task`, never eats our own cancel
            self._task = None

    async def _run(self) -> None:
        housekeeping = 0.0
        while True:
            try:
                if time.monotonic() - housekeeping > _HOUSEKEEPING:
                    housekeeping = time.monotonic()
                    await self._housekeeping()
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a locked database: try again on the next round
                logger.warning("outbox round failed: {}", exc)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that
            # arrives as the wake-up does, and `stop()` then waited for this loop for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL if self._backlog else 10 * POLL):
                    await self._wake.wait()
            self._wake.clear()

    async def drain(self) -> None:
        """One pass over the pending rows: chats concurrently, each chat's rows in order,
        stopping at the first one its channel cannot take yet."""
        async with self._draining:
            await self._drain()

    async def _drain(self) -> None:
        while True:
            self._deferred.clear()
            read_after = self._releases
            entries = await self.storage.run(self.storage.outbox.pending, 1000)
            by_chat: dict[tuple[str, str], list[OutboxEntry]] = {}
            late: set[tuple[str, str]] = set()
            held: set[tuple[str, str]] = set()
            for entry in entries:
                if entry.id > self._boot_id:
                    released = self._released.get(entry.id, 0)
                    if released > read_after:
                        # Read before its live send gave up (its text may since have lost the
                        # parts that went out): its chat waits for the next read, in order.
                        late.add((entry.platform, entry.chat_id))
                        continue
                    if not released:
                        continue  # still being sent live
                if entry.id in self._marking:  # sent; its mark is on its way
                    continue
                if entry.id in self._handed:  # a client is writing it: its chat waits
                    held.add((entry.platform, entry.chat_id))
                    continue
                by_chat.setdefault((entry.platform, entry.chat_id), []).append(entry)
            for key in late | held:
                by_chat.pop(key, None)
            self._backlog |= set(by_chat)
            if self._due:  # held back by the delivery policy: they stay in the backlog
                now = time.monotonic()
                for key in [k for k in by_chat if self._due.get(k, (0.0,))[0] > now]:
                    del by_chat[key]
            unchecked = await self._find_sent(by_chat)
            results = await self._drain_chats(by_chat, unchecked)
            for key, ok in zip(by_chat, results, strict=True):
                if ok is True and key not in self._deferred:
                    self._backlog.discard(key)
            if late:
                continue
            if not self._deferred or not any(r is True for r in results):
                return

    async def _drain_chats(
        self, by_chat: dict[tuple[str, str], list[OutboxEntry]], unchecked: set[int]
    ) -> list[bool | BaseException]:
        """Every chat's rows, chats concurrently, started `DRAIN_SLICE` chats per pass of the
        event loop: each send does some work before its first wait (a long text split and
        rendered, a OneBot account looked up), and a pass over a thousand chats (what an
        account that went away owes) started at once held every other chat that long."""
        tasks: list[asyncio.Future[bool]] = []
        try:
            for n, rows in enumerate(by_chat.values()):
                if n and n % DRAIN_SLICE == 0:
                    await asyncio.sleep(0)
                tasks.append(asyncio.ensure_future(self._drain_chat(rows, unchecked)))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        return await asyncio.gather(*tasks, return_exceptions=True)

    async def _find_sent(self, by_chat: dict[tuple[str, str], list[OutboxEntry]]) -> set[int]:
        """Rows owed from before this start may have gone out just before the bot died,
        unmarked: before they are sent, a channel that can look (`find_sent`, OneBot's chat
        history) says which were sent; those are marked delivered and dropped from `by_chat`.
        Returns the rows it could not check yet (their chat waits: no account online)."""
        unchecked: set[int] = set()
        for platform, channel in self.channels.items():
            find = getattr(channel, "find_sent", None)
            todo = [
                e
                for (p, _), rows in by_chat.items()
                if p == platform
                for e in rows
                if e.id <= self._boot_id and e.id not in self._checked
            ]
            if find is None or not todo:
                continue
            try:
                verdicts = await find([(message_of(e), e.created_at) for e in todo])
            except Exception as exc:  # cannot tell: send (at least once)
                logger.opt(exception=exc).warning("{}: find_sent failed", platform)
                verdicts = {e.id: False for e in todo}
            sent = 0
            for entry in todo:
                verdict = verdicts.get(entry.id)
                if verdict is None:
                    unchecked.add(entry.id)
                    continue
                self._checked.add(entry.id)
                if verdict:
                    sent += 1
                    await self.finish(message_of(entry), "delivered")
                    by_chat[(entry.platform, entry.chat_id)].remove(entry)
            if sent:
                logger.warning(
                    "{} message(s) to {} were sent before the last stop but not marked: "
                    "marked delivered, not sent again",
                    sent,
                    platform,
                )
        return unchecked

    async def _drain_chat(self, rows: list[OutboxEntry], unchecked: set[int]) -> bool:
        for entry in rows:
            if entry.id in unchecked:
                return False  # its channel must look first; it waits for an account
            if entry.id in self._handed:
                return False  # a client took it since this pass read it: the chat waits
            try:
                if not await self._send(message_of(entry), raise_refused=False):
                    return False
            except Exception as exc:
                logger.opt(exception=exc).error("outbox row {} failed", entry.id)
        return True

    async def _housekeeping(self) -> None:
        for entry in await self.storage.run(self.storage.outbox.expire, self.settings.max_wait):
            self.expired += 1
            logger.error(
                "message {} to {} {} expired after waiting {:.0f} s for its channel: {!r}",
                entry.id,
                entry.platform,
                entry.chat_id,
                self.settings.max_wait,
                str(entry.payload.get("text", ""))[:80],
            )
        await self.storage.run(self.storage.outbox.prune, self.settings.retention)

    # -- readers: SSE replays, the webhook ------------------------------------------------
    async def since(self, after: int) -> list[tuple[OutgoingMessage, str]]:
        """Every event after id `after` still kept (see `retention`), in order, with its
        state: what an SSE client reconnecting with Last-Event-ID missed."""
        return [(message_of(e), e.state) for e in await self.entries_since(after)]

    async def entries_since(self, after: int) -> list[OutboxEntry]:
        found: list[OutboxEntry] = []
        while True:
            page = await self.storage.run(self.storage.outbox.since, after, 1000)
            found += page
            if len(page) < 1000:
                return found
            after = page[-1].id

    async def last_id(self) -> int:
        """The highest event id committed so far."""
        return await self.storage.run(self.storage.outbox.last_id)

    def reader(self, last: int) -> EventReader:
        """A reader of the events after id `last` (chatfn/runtime/event_stream.py)."""
        return EventReader(self.entries_since, self._gaps, self.settings.gap_wait, last)

    async def waiting(self, platform: str) -> list[OutgoingMessage]:
        """The messages for `platform` still waiting for a channel, oldest first."""
        entries = await self.storage.run(self.storage.outbox.pending, 1000, platform)
        return [message_of(e) for e in entries]

    async def take_waiting(self, platform: str) -> list[OutgoingMessage]:
        """The messages for `platform` waiting for a channel, oldest first, each handed to
        this caller alone (an event-stream client without an id: README, "Delivery"). What
        another caller took, or what went out already but whose mark is not in the database
        yet, is left out. The caller `finish`es each it wrote and gives the rest back
        (`give_back`): they wait for the next one."""
        entries = await self.storage.run(self.storage.outbox.pending, 1000, platform)
        return [
            message_of(e) for e in entries if e.id not in self._marking and self.hand_over(e.id)
        ]

    def hand_over(self, event_id: int) -> bool:
        """True once per waiting message: the caller (one client of several that saw it, as
        the drain passed it on) writes it; False to every other."""
        if event_id in self._handed:
            return False
        self._handed[event_id] = None
        if len(self._handed) > HANDED_KEPT:
            self._handed.popitem(last=False)
        return True

    def give_back(self, messages: Iterable[OutgoingMessage]) -> None:
        """Waiting messages a caller took and did not write (its client went away): the
        next client, or the drain, takes them."""
        for out in messages:
            if out.event_id is not None:
                self._handed.pop(out.event_id, None)

    async def cursor(self, name: str) -> int:
        """How far the reader `name` got; a new reader starts with what this process owes
        (rows from before start-up that are delivered are not replayed to it)."""
        value = await self.storage.run(self.storage.outbox.cursor, name)
        return self._boot_id if value is None else value

    async def set_cursor(self, name: str, last_id: int) -> None:
        await self.storage.run(self.storage.outbox.set_cursor, name, last_id)

    def count_expired(self, out: OutgoingMessage, why: str) -> None:
        self.expired += 1
        logger.error(
            "message {} to {} {} expired: {}: {!r}",
            out.event_id,
            out.platform,
            out.chat_id,
            why,
            out.text[:80],
        )

    def stats(self) -> dict[str, int]:
        return {
            "backlog_chats": len(self._backlog),
            "delivered": self.delivered,
            "failed": self.failed,
            "expired": self.expired,
        }
