"""The gateway and worker roles (README, "Running more than one process").

A gateway holds the platform connections. `Bot.handle` there publishes the message to its
chat's partition and waits for the replies a worker sends back to this gateway's own queue; it
runs no turn and no plugin service. A worker consumes partitions (one message at a time per
partition, acknowledged after the turn) and runs the turns on its own `Bot`, whose outgoing
messages are stored (outbox + history rows, one transaction: the outbox lives in the shared
database), then relayed with their event id to the gateway that published the message
(replies) or to any gateway holding the platform (reminders, welcomes, and replies whose
gateway is gone). The gateway publishes each to its /v1/events subscribers, sends it and marks
its row delivered; rows still pending when a gateway (re)starts are sent by its outbox drain,
so a gateway killed with replies in flight sends them after its restart. One process may be
both.

At least once, never twice: a message is acknowledged only after its turn finished and the
turn was recorded by platform message id (`handled_messages`); a worker that dies mid-turn
leaves its message to the next consumer of the partition, which runs it again unless its turn
had finished (then it only tells the gateway the turn is done). The gateway drops a reply it
already passed on (same message, same position in the turn), which covers a worker that died
between sending a reply and recording the turn.

Balance: every worker subscribes to every partition; the broker makes the first in line the
active one. Workers note themselves in the `workers` table every few seconds, and each gives up
its place at the head of the partitions that rendezvous hashing over the live workers assigns
to another (`PartitionConsumer.release`), so N workers share the partitions about evenly and a
new worker gets its share without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loguru import logger
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from chatfn.common.messages import IncomingMessage, OutgoingMessage, StreamObserver, SystemEvent
from chatfn.runtime.bot import Bot, ReplySink
from chatfn.runtime.broker import (
    Broker,
    PartitionConsumer,
    decode_event,
    decode_incoming,
    decode_outgoing,
    encode_event,
    encode_incoming,
    encode_outgoing,
)
from chatfn.runtime.event_stream import message_of
from chatfn.runtime.metric_snapshots import MetricSnapshots
from chatfn.runtime.switch import tell_stored
from chatfn.runtime.turn_writer import RelayedTurn
from chatfn.storage.db import StorageError
from chatfn.storage.fencing import Fenced, Lease, check_lease, current_lease

SEEN_KEPT = 10_000
# What a worker says when the database cannot store a reply (it sends nothing unstored).
NOT_STORED = (
    "Sorry, I could not save my answer (the database is unavailable), so I did not send it; "
    "please send your message again in a moment."
)


def process_id(role: str) -> str:
    """A name unique to this process, readable in logs: role-host-pid-random."""
    return f"{role}-{socket.gethostname()[:24]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def chat_of(body: dict[str, Any]) -> str:
    """The chat a work item belongs to (the unit of order)."""
    item = body.get("msg") or body["event"]
    return f"{item['platform']}\x00{item['chat_id']}"


def turn_key(platform: str, chat_id: str, message_id: str) -> str:
    return f"{platform}\x00{chat_id}\x00{message_id}"


@dataclass
class _Waiting:
    sink: ReplySink | None
    sent: list[OutgoingMessage] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Gateway:
    """The switch's `remote` of a gateway process."""

    def __init__(self, bot: Bot, broker: Broker, gateway_id: str | None = None) -> None:
        self.bot = bot
        self.broker = broker
        self.id = gateway_id or process_id("gateway")
        self._waiting: dict[str, _Waiting] = {}
        self._seen: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._chat_order: dict[tuple[str, str], asyncio.Lock] = {}
        # How long a request waits for its turn: the turn's own deadline, plus one redelivery.
        self.wait = bot.settings.function_calls.total_timeout + broker.settings.redelivery_timeout
        self.published = 0
        self.duplicates = 0

    async def start(self) -> None:
        await self.broker.consume(
            self.broker.gateway_queue(self.id),
            self._on_reply,
            exclusive=True,
            durable=False,
            acked=False,
        )
        for platform in self.bot.delivery.channels:
            await self.broker.declare_platform_queue(platform)
            await self.broker.consume(
                self.broker.platform_queue(platform),
                self._on_platform_message,
                arguments={"x-queue-type": "quorum"},
            )
        self.bot.switch.remote = self
        logger.info("gateway {} publishing to {}", self.id, self.broker.safe_url)

    # -- Switch.remote ------------------------------------------------------------------------
    async def handle(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None,
        on_stream: StreamObserver | None,
        on_stored: Callable[[], None] | None = None,
    ) -> list[OutgoingMessage]:
        if not msg.message_id:  # idempotency needs one; every channel sets it, a test may not
            msg.message_id = uuid.uuid4().hex[:16]
        key = turn_key(msg.platform, msg.chat_id, msg.message_id)
        waiting = self._waiting[key] = _Waiting(sink)
        try:
            body: dict[str, Any] = {
                "kind": "message",
                "gateway": self.id,
                "msg": encode_incoming(msg),
            }
            body["published_at"] = time.time()
            # This gateway ends a request on a reply marked "done" (a worker that knows it
            # saves a publish per turn; an older one sends "done" on its own).
            body["done_in_reply"] = True
            await self.broker.publish_incoming(msg.platform, msg.chat_id, body)
            self.published += 1
            if on_stored is not None:  # persistent, confirmed: the broker keeps it for a worker
                tell_stored(on_stored)
            try:
                async with asyncio.timeout(self.wait):
                    await waiting.done.wait()
            except TimeoutError:
                logger.bind(chat_id=msg.chat_id).warning(
                    "no worker finished message {} within {:.0f} s", msg.message_id, self.wait
                )
        finally:
            self._waiting.pop(key, None)
        return waiting.sent

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]:
        body = {"kind": "event", "gateway": self.id, "event": encode_event(event)}
        await self.broker.publish_incoming(event.platform, event.chat_id, body)
        return []  # what the handlers send arrives through the platform's queue

    # -- from workers ------------------------------------------------------------------------
    async def _on_reply(self, body: dict[str, Any]) -> None:
        key = body.get("source", "")
        waiting = self._waiting.get(key)
        if body.get("kind") == "done":  # after the turn's replies, which may still be passing on
            async with self._lock_for_chat(str(body.get("platform")), str(body.get("chat_id"))):
                if waiting is not None:
                    waiting.done.set()
            return
        out = decode_outgoing(body["out"])
        # A reply carrying "done" is the turn's last: the request ends once it is passed on.
        async with self._lock_for(out):
            await self._reply_in_order(body, key, out, waiting)
            if body.get("done") and waiting is not None:
                waiting.done.set()

    async def _reply_in_order(
        self, body: dict[str, Any], key: str, out: OutgoingMessage, waiting: _Waiting | None
    ) -> None:
        """Pass a worker's reply on (its chat's lock held), unless it was passed on already."""
        seq = (key, int(body.get("seq", 0)))
        if seq in self._seen:
            self._repeated(seq)
            return
        self._seen[seq] = None
        if len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)
        if body.get("finished"):  # a turn run again: this reply was delivered the first time
            self._repeated(seq)
            return
        if waiting is not None and waiting.sink is not None:
            waiting.sent.append(out)
            await self._pass_on(out, waiting.sink)
        else:  # the request gave up waiting: the chat still gets it
            await self._pass_on(out, None)

    def _repeated(self, seq: tuple[str, int]) -> None:
        """A reply passed on already, relayed again by a turn that ran twice (after a worker
        died or lost its partition mid-turn): dropped, and said (it should be rare)."""
        self.duplicates += 1
        logger.info("dropped a repeated reply (message {!r}, #{})", seq[0], seq[1])

    async def _on_platform_message(self, body: dict[str, Any]) -> None:
        out = decode_outgoing(body["out"])
        if out.event_id is not None and out.event_id <= self.bot.outbox.boot_id:
            return  # owed from before this gateway started: its outbox drain sends it
        async with self._lock_for(out):
            await self._pass_on(out, None)

    async def _pass_on(self, out: OutgoingMessage, sink: ReplySink | None) -> None:
        """To the event subscribers, then the waiting request or the channel; the outbox row
        the worker wrote is marked delivered (compare-and-set: a row another path finished is
        not marked twice), or stays pending for this gateway's drain."""
        if out.platform not in self.bot.delivery.channels and sink is None:
            logger.warning("no channel {!r} on this gateway for {}", out.platform, out.chat_id)
            return
        try:
            await self.bot.delivery.pass_on(out, sink)
        except Exception as exc:  # one chat's failure must not stop the gateway's queue
            logger.opt(exception=exc).error("sending to {} failed", out.chat_id)

    def _lock_for(self, out: OutgoingMessage) -> asyncio.Lock:
        return self._lock_for_chat(out.platform, out.chat_id)

    def _lock_for_chat(self, platform: str, chat_id: str) -> asyncio.Lock:
        """Replies are consumed concurrently (a task each, started in arrival order); one
        chat's are passed on in that order (asyncio.Lock is FIFO)."""
        key = (platform, chat_id)
        lock = self._chat_order.get(key)
        if lock is None:
            if len(self._chat_order) > 4096:
                for k in [k for k, v in self._chat_order.items() if not v.locked()]:
                    del self._chat_order[k]
            lock = self._chat_order[key] = asyncio.Lock()
        return lock


class Worker:
    """Consumes the partitions and runs turns on `bot` (which sends through the broker)."""

    def __init__(self, bot: Bot, broker: Broker, worker_id: str | None = None) -> None:
        self.bot = bot
        self.broker = broker
        self.id = worker_id or process_id("worker")
        self.host = socket.gethostname()[:128]
        self.consumers = [
            PartitionConsumer(broker, k, self._on_work, chat_of, self._claim)
            for k in range(broker.settings.partitions)
        ]
        self.interval = max(0.5, broker.settings.redelivery_timeout / 6)
        self._members: list[str] = []
        self._task: asyncio.Task[None] | None = None
        # Its counters, for the gateways' admin console (a worker serves no /metrics).
        self.snapshots = MetricSnapshots(bot, self.id, self.host)
        self.turns = 0
        self.skipped = 0
        bot.switch.relay = self._relay
        # A turn of a partition another worker claimed since writes nothing (fencing).
        bot.storage.set_fence(check_lease)
        limit_idle_transactions(bot.storage.engine, broker.settings.redelivery_timeout / 2)
        if not bot.delivery.channels:  # its gateways deliver (and drain) the rows it writes
            bot.outbox.drains = False

    async def start(self) -> None:
        # In line on every partition before the others can see this worker live: a worker
        # that sees it gives up this one's share and subscribes again at the back, which puts
        # it behind this one only if this one is already there (noted first, a slow subscribe
        # let the other rejoin ahead and keep every partition).
        for consumer in self.consumers:
            await consumer.subscribe()
        store = self.bot.storage.cluster
        await self.bot.storage.run(store.seen, self.id, self.host)
        self.snapshots.start()
        self._task = asyncio.create_task(self._membership(), name="worker-membership")
        logger.info("worker {} consuming {} partitions", self.id, len(self.consumers))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.snapshots.beat()  # its last counts
        await self.snapshots.stop()
        for consumer in self.consumers:
            with contextlib.suppress(Exception):
                await consumer.release()
        with contextlib.suppress(Exception):
            await self.bot.storage.run(self.bot.storage.cluster.gone, self.id)

    # -- work ------------------------------------------------------------------------------
    async def _claim(self, partition: int, received: datetime) -> Lease | None:
        """Claim `partition` (the broker started delivering it here): chatfn/storage/fencing.py."""
        storage = self.bot.storage
        return await storage.run(storage.leases.claim, partition, self.id, received)

    async def _on_work(self, body: dict[str, Any]) -> None:
        kind = body.get("kind")
        if kind == "event":
            await self.bot.handle_event_here(decode_event(body["event"]))
            return
        if kind != "message":
            logger.error("unknown work kind {!r} dropped", kind)
            return
        await self._turn(
            decode_incoming(body["msg"]),
            str(body.get("gateway", "")),
            done_in_reply=bool(body.get("done_in_reply")),
        )

    async def _turn(self, msg: IncomingMessage, gateway: str, done_in_reply: bool = False) -> None:
        """Run one message's turn. Its replies are written with the turn's own writes (the
        tool round's, the last one; chatfn/runtime/turn_writer.py), keyed `<message id>#<position>`
        so a turn run again writes each once and relays it with the same event id, and
        relayed to `gateway` after each write; the last write also records the turn as
        finished (`handled_messages`), and its replies go in one publish with the end of
        the turn ("done") when the gateway takes that (`done_in_reply`). When the database
        cannot store a reply, neither it nor anything after it is sent: the user gets
        NOT_STORED instead, once, and the message is acknowledged (they were told to send
        it again). Raises `Fenced` when the partition was claimed by another worker since."""
        key = turn_key(msg.platform, msg.chat_id, msg.message_id)
        storage = self.bot.storage
        try:
            finished = await storage.run(
                storage.cluster.finished, msg.platform, msg.chat_id, msg.message_id
            )
        except StorageError:  # cannot tell: run it (its writes will say what they can store)
            finished = None
        if finished is not None:
            self.skipped += 1  # delivered again after its turn finished: not answered twice
            await self._relay_owed(msg, gateway, key, finished)
            await self.broker.publish_to_gateway(gateway, self._done(msg, key))
            return
        # The last write's replies, published after it with "done".
        last: list[tuple[dict[str, Any], OutgoingMessage]] = []
        unsent: list[BaseException] = []

        async def relay(out: OutgoingMessage, seq: int, state: str, final: bool) -> None:
            reply = self._reply(key, seq, out, finished=state != "pending")
            if final:
                last.append((reply, out))
                return
            try:
                await self._to_gateway(gateway, reply, out, msg.chat_id)
            except Exception as exc:  # stored, not relayed: the message goes back (below)
                unsent.append(exc)
                raise

        turn = RelayedTurn(msg.message_id, self.id, relay)
        try:
            await self.bot.handle_here(msg, relayed=turn)
        except (StorageError, SQLAlchemyError) as exc:
            logger.bind(chat_id=msg.chat_id).error(
                "turn of message {} cut by the database: {}", msg.message_id, exc
            )
            turn.failed = True
        if unsent:
            # A reply is stored but did not reach the broker: the message goes back to the
            # queue, and its redelivery relays what the turn still owes (`_relay_owed`).
            raise unsent[0]
        if turn.failed:
            await self._tell_not_stored(msg, gateway, key, turn.count)
            await self.broker.publish_to_gateway(gateway, self._done(msg, key))
            return
        self.turns += 1
        if last and done_in_reply:
            last[-1][0]["done"] = True  # the gateway ends the request after passing it on
        for reply, out in last:
            await self._to_gateway(gateway, reply, out, msg.chat_id)
        if not (last and done_in_reply):
            await self.broker.publish_to_gateway(gateway, self._done(msg, key))

    @staticmethod
    def _reply(key: str, seq: int, out: OutgoingMessage, *, finished: bool) -> dict[str, Any]:
        """The envelope of a reply to a gateway: `finished`, its row was finished (delivered)
        by an earlier run of the turn, so the gateway only counts it."""
        return {
            "kind": "out",
            "source": key,
            "seq": seq,
            "out": encode_outgoing(out),
            "finished": finished,
        }

    @staticmethod
    def _done(msg: IncomingMessage, key: str) -> dict[str, Any]:
        return {"kind": "done", "source": key, "platform": msg.platform, "chat_id": msg.chat_id}

    async def _relay_owed(self, msg: IncomingMessage, gateway: str, key: str, replies: int) -> None:
        """Relay the replies of a finished turn still pending (its worker died between the
        turn's last write and relaying it); the gateway drops those it passed on already."""
        storage = self.bot.storage
        try:
            owed = await storage.run(
                storage.cluster.owed, msg.platform, msg.chat_id, msg.message_id, replies
            )
        except StorageError as exc:
            logger.warning("replies owed for message {} not read: {}", msg.message_id, exc)
            return
        for seq, entry in owed:
            out = message_of(entry)
            await self._to_gateway(
                gateway, self._reply(key, seq, out, finished=False), out, msg.chat_id
            )

    async def _to_gateway(
        self, gateway: str, reply: dict[str, Any], out: OutgoingMessage, chat_id: str
    ) -> None:
        if not await self.broker.publish_to_gateway(gateway, reply) and not reply["finished"]:
            # The gateway is gone (its request with it): any gateway holding the platform
            # sends it, or, once restarted, the drain of its outbox does.
            logger.bind(chat_id=chat_id).info(
                "gateway {} is gone: event {} goes to the {} queue",
                gateway,
                out.event_id,
                out.platform,
            )
            await self._to_platform(out)

    async def _tell_not_stored(
        self, msg: IncomingMessage, gateway: str, key: str, seq: int
    ) -> None:
        """Send NOT_STORED (unstored: the database is what failed), unless this worker lost
        the partition meanwhile (then the new owner answers, and this one says nothing)."""
        lease = current_lease.get()
        if lease is not None and not await self._still_holds(lease):
            raise Fenced(f"partition {lease.partition} moved on; nothing sent for {msg.chat_id}")
        out = OutgoingMessage(msg.platform, msg.chat_id, NOT_STORED, msg.is_group)
        out.notice = True
        reply = {"kind": "out", "source": key, "seq": seq, "out": encode_outgoing(out)}
        reply["finished"] = False
        await self._to_gateway(gateway, reply, out, msg.chat_id)

    async def _still_holds(self, lease: Lease) -> bool:
        """The database says whether `lease` is still the newest claim; while it is away, the
        consumer's channel does (open: the broker still delivers the partition here)."""
        storage = self.bot.storage
        try:
            async with asyncio.timeout(2):
                return await storage.run(storage.leases.still_holds, lease)
        except (StorageError, TimeoutError):
            return self.consumers[lease.partition].holds(lease)

    async def _relay(self, out: OutgoingMessage, sink: ReplySink | None) -> None:
        if sink is not None:
            await sink(out)
        else:
            await self.bot.outbox.write(out)
            await self._to_platform(out)

    async def _to_platform(self, out: OutgoingMessage) -> None:
        await self.broker.publish_to_platform(out.platform, {"out": encode_outgoing(out)})

    # -- balance ---------------------------------------------------------------------------
    async def _membership(self) -> None:
        store = self.bot.storage.cluster
        while True:
            try:
                await self.bot.storage.run(store.seen, self.id, self.host)
                live = await self.bot.storage.run(store.live, 3 * self.interval)
                if live != self._members and self.id in live:
                    self._members = live
                    await self._rebalance(live)
                await self.snapshots.beat()
            except Exception as exc:  # the database may be briefly away; the broker is not
                logger.warning("worker membership update failed: {}", exc)
            await asyncio.sleep(self.interval)

    async def _rebalance(self, live: list[str]) -> None:
        mine = owned_partitions(self.id, live, len(self.consumers))
        for consumer in self.consumers:
            if consumer.k not in mine:
                await consumer.release()
                await consumer.subscribe()  # back of the line
        # Logged once the others' partitions are given up, so the line states what is true
        # (the cluster tests wait for it before they send).
        logger.info("{} live worker(s); {} owns {} partition(s)", len(live), self.id, len(mine))


def limit_idle_transactions(engine: Engine, seconds: float) -> None:
    """End (on the server) a transaction of this process that waits longer than `seconds` for
    its next statement: a worker stopped mid-transaction (SIGSTOP, a machine gone) would hold
    its row locks until its connection times out, hours later, and the lock on its partition's
    lease row would keep the next owner from claiming the partition. PostgreSQL only (SQLite
    is one machine's file)."""
    if engine.dialect.name != "postgresql":
        return
    setting = f"SET idle_in_transaction_session_timeout = {max(1000, int(seconds * 1000))}"

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute(setting)
        dbapi_conn.commit()

    event.listen(engine, "connect", on_connect)
    engine.dispose()  # connections made before (migrations) are made again, with the setting


def owned_partitions(worker: str, live: list[str], partitions: int) -> set[int]:
    """Rendezvous hashing: partition k belongs to the live worker with the highest
    crc32(worker, k); adding or removing a worker moves only that worker's share."""
    return {
        k
        for k in range(partitions)
        if max(live, key=lambda w: (zlib.crc32(f"{w}/{k}".encode()), w)) == worker
    }
