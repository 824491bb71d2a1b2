"""RabbitMQ transport between gateways and workers (aio-pika), and the envelopes it carries.

Topology, all names under `broker.prefix` (P):

    P.in.<k>        quorum queue, single active consumer: the incoming messages and system
                    events of the chats whose hash falls in partition k (of `broker.partitions`).
                    Only one worker at a time consumes it, one message at a time (prefetch 1),
                    acknowledging after the turn: a chat's messages are handled in arrival
                    order, and a worker that dies returns its message to the queue, where the
                    next consumer in line takes it.
    P.gw.<id>       one gateway's own queue (exclusive): the replies to the messages it
                    published, and the end of each turn ("done"), so a waiting HTTP request or
                    OneBot chat gets its answers from whichever worker produced them.
    P.out.<name>    quorum queue per platform: messages the bot starts on its own (reminders,
                    welcomes), and replies whose gateway's queue is gone (it died or
                    restarted), taken by one of the gateways that hold that platform.

Why RabbitMQ and not Redis Streams: a single-active-consumer queue gives per-partition order
and failover (the broker hands the queue to the next consumer the moment a worker's connection
dies) without any lease or claim code of ours; with Redis Streams a consumer group spreads one
stream's entries over all its consumers, so per-chat order would need our own partition leases,
and redelivery our own XAUTOCLAIM loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import asdict, fields
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from loguru import logger
from yarl import URL

from chatfn.common.config import BrokerSettings
from chatfn.common.extras import RABBITMQ, import_extra
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.runtime.chat_locks import ChatLocks
from chatfn.storage.fencing import Fenced, Lease, current_lease

if TYPE_CHECKING:  # aio-pika is the `rabbitmq` extra: imported when a Broker is made
    from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection

Handler = Callable[[dict[str, Any]], Awaitable[None]]
# (partition, when its message was received) -> the lease claimed, or None
# (chatfn/storage/fencing.py)
Claim = Callable[[int, datetime], Awaitable[Lease | None]]
KeyOf = Callable[[dict[str, Any]], str]
QUORUM_SAC = {"x-queue-type": "quorum", "x-single-active-consumer": True}


# -- envelopes -------------------------------------------------------------------------------
def encode_incoming(msg: IncomingMessage) -> dict[str, Any]:
    data = asdict(msg)
    data["time"] = msg.time.isoformat()
    return data


def decode_incoming(data: dict[str, Any]) -> IncomingMessage:
    names = {f.name for f in fields(IncomingMessage)}
    values = {k: v for k, v in data.items() if k in names}
    values["time"] = datetime.fromisoformat(values["time"])
    return IncomingMessage(**values)


def encode_event(event: SystemEvent) -> dict[str, Any]:
    return asdict(event)


def decode_event(data: dict[str, Any]) -> SystemEvent:
    names = {f.name for f in fields(SystemEvent)}
    return SystemEvent(**{k: v for k, v in data.items() if k in names})


def encode_outgoing(out: OutgoingMessage) -> dict[str, Any]:
    data = asdict(out)
    data.pop("thinking", None)  # stored with the history by the worker; never shown in chat
    return data


def decode_outgoing(data: dict[str, Any]) -> OutgoingMessage:
    names = {f.name for f in fields(OutgoingMessage)}
    return OutgoingMessage(**{k: v for k, v in data.items() if k in names})


async def _settle(done: Awaitable[Any]) -> None:
    """Ack, nack or reject; on a channel that is gone already the broker has returned the
    message to its queue, so there is nothing left to settle."""
    try:
        await done
    except Exception as exc:
        logger.debug("message not settled (its channel is gone): {}", exc)


def partition_of(platform: str, chat_id: str, partitions: int) -> int:
    """The partition of a chat: stable across processes and restarts (crc32, not hash())."""
    return zlib.crc32(f"{platform}\x00{chat_id}".encode()) % partitions


def heartbeat_for(redelivery_timeout: float) -> int:
    """The AMQP heartbeat (whole seconds) for a redelivery bound."""
    return max(1, int(redelivery_timeout / 4))


# -- the connection --------------------------------------------------------------------------
class Broker:
    """One process's connection to RabbitMQ."""

    def __init__(self, settings: BrokerSettings) -> None:
        if not settings.url:
            raise ValueError("broker.url is not set")
        self.settings = settings
        self.prefix = settings.prefix
        self._aio_pika = import_extra(RABBITMQ)
        self._conn: AbstractRobustConnection | None = None
        self._pub: AbstractChannel | None = None

    @property
    def safe_url(self) -> str:
        url = URL(self.settings.url or "")
        return str(url.with_password("***")) if url.password else str(url)

    async def connect(self) -> None:
        # RabbitMQ closes the connection of a peer it has not heard from for two to three
        # heartbeat intervals (a machine gone, a process stopped): a quarter of the bound, so
        # its messages go to another worker within `redelivery_timeout`.
        heartbeat = heartbeat_for(self.settings.redelivery_timeout)
        # After an outage the connection is made again within a heartbeat (aio-pika's default
        # is 5 s), so the turns waiting on it resume before their requests give up.
        url = URL(self.settings.url or "").update_query(
            heartbeat=heartbeat, reconnect_interval=heartbeat
        )
        self._conn = await self._aio_pika.connect_robust(str(url), timeout=10)
        self._pub = await self._conn.channel(publisher_confirms=True)
        for k in range(self.settings.partitions):
            await self._pub.declare_queue(
                self.partition_queue(k), durable=True, arguments=QUORUM_SAC
            )

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @property
    def connection(self) -> AbstractRobustConnection:
        if self._conn is None:
            raise RuntimeError("broker not connected")
        return self._conn

    def partition_queue(self, k: int) -> str:
        return f"{self.prefix}.in.{k}"

    def gateway_queue(self, gateway_id: str) -> str:
        return f"{self.prefix}.gw.{gateway_id}"

    def platform_queue(self, platform: str) -> str:
        return f"{self.prefix}.out.{platform}"

    async def _publish(self, routing_key: str, body: dict[str, Any], persistent: bool) -> bool:
        """Publish (mandatory, confirmed); False when no queue took it (a gateway's queue is
        gone with its process)."""
        assert self._pub is not None, "broker not connected"
        from aiormq.abc import DeliveredMessage  # aio-pika's own transport

        aio_pika = self._aio_pika
        mode = (
            aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT
        )
        message = aio_pika.Message(
            json.dumps(body, ensure_ascii=False).encode(),
            delivery_mode=mode,
            content_type="application/json",
            # The broker names a returned (unroutable) message by its id.
            message_id=uuid.uuid4().hex,
        )
        confirm = await self._pub.default_exchange.publish(
            message, routing_key=routing_key, mandatory=True
        )
        return not isinstance(confirm, DeliveredMessage)

    async def publish_incoming(self, platform: str, chat_id: str, body: dict[str, Any]) -> None:
        k = partition_of(platform, chat_id, self.settings.partitions)
        await self._publish(self.partition_queue(k), body, persistent=True)

    async def publish_to_gateway(self, gateway_id: str, body: dict[str, Any]) -> bool:
        """False when that gateway's queue is gone (its process died or restarted)."""
        return await self._publish(self.gateway_queue(gateway_id), body, persistent=False)

    async def publish_to_platform(self, platform: str, body: dict[str, Any]) -> None:
        await self._publish(self.platform_queue(platform), body, persistent=True)

    async def declare_platform_queue(self, platform: str) -> None:
        assert self._pub is not None, "broker not connected"
        await self._pub.declare_queue(
            self.platform_queue(platform), durable=True, arguments={"x-queue-type": "quorum"}
        )

    async def consume(
        self,
        queue_name: str,
        handler: Handler,
        *,
        exclusive: bool = False,
        durable: bool = True,
        arguments: dict[str, Any] | None = None,
        prefetch: int = 50,
        acked: bool = True,
    ) -> AbstractChannel:
        """Consume `queue_name` on a channel of its own (closing that channel stops it and
        returns what it had not acknowledged); `handler` runs per message, acked after it.
        `acked=False`: the broker counts a message taken once it is sent (no acknowledgement
        frame per message), for a queue that dies with this process anyway (a gateway's own:
        what it holds is lost with the process whether acknowledged or not)."""
        channel = await self.connection.channel()
        if acked:
            await channel.set_qos(prefetch_count=prefetch)
        queue = await channel.declare_queue(
            queue_name,
            durable=durable,
            exclusive=exclusive,
            auto_delete=exclusive,
            arguments=arguments,
        )

        async def on_message(message: AbstractIncomingMessage) -> None:
            try:
                body = json.loads(message.body)
            except ValueError:
                logger.error("dropping a message on {} that is not JSON", queue_name)
                if acked:
                    await message.reject()
                return
            await handler(body)
            if acked:
                await message.ack()

        await queue.consume(on_message, no_ack=not acked)
        return channel


class PartitionConsumer:
    """This worker's place in line on one partition queue (single active consumer).

    Up to PREFETCH messages of the partition are taken at once and run concurrently, except
    that each chat's run strictly one after the other, in delivery order (a FIFO lock per chat,
    taken before the first await); each is acknowledged when its turn is over. A quorum queue
    writes every acknowledgement to disk, so taking one message at a time would make each turn
    wait for the broker's disk on top of its own work.

    Every message is settled: acknowledged when its handler returned; returned to the queue
    (nack, requeue) when it raised, up to MAX_DELIVERIES deliveries, then rejected with an
    error logged (a message that fails every time must not block its chat for ever); a
    message whose channel closed meanwhile (the broker connection dropped) went back to the
    queue with it and is left alone.

    The first message on each new channel claims the partition (`claim`, chatfn/storage/fencing.py:
    the next epoch of its lease row) and every turn runs with that lease in its context, so
    its writes are fenced: once another worker claimed the partition, they raise `Fenced` and
    the message is returned (to a channel that is closed by then, as a rule).

    `release()` gives the partition up without breaking any chat's order: new deliveries are
    left unacknowledged, the turns already taken finish and are acknowledged, then the channel
    is closed, which returns the rest to the head of the queue; `subscribe()` again puts this
    worker at the back of the line."""

    PREFETCH = 32
    MAX_DELIVERIES = 5
    # Seconds before a message whose handler raised goes back to the queue (its chat waits:
    # order), and the most between two claim attempts while the database is away.
    RETRY_PAUSE = 1.0

    def __init__(
        self, broker: Broker, k: int, handler: Handler, key_of: KeyOf, claim: Claim
    ) -> None:
        self.broker = broker
        self.k = k
        self.handler = handler
        self.key_of = key_of
        self.claim = claim
        self.channel: AbstractChannel | None = None
        self._closing = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._chats = ChatLocks()  # one chat's messages in order, chats concurrently
        self._claiming = asyncio.Lock()
        # The lease of the newest claim, and the (aiormq) channel it was claimed for.
        self.lease: Lease | None = None
        self._lease_channel: Any = None
        self.handled = 0
        self.returned = 0

    async def subscribe(self) -> None:
        self._closing = False
        channel = await self.broker.connection.channel()
        await channel.set_qos(prefetch_count=self.PREFETCH)
        queue = await channel.declare_queue(
            self.broker.partition_queue(self.k), durable=True, arguments=QUORUM_SAC
        )
        await queue.consume(self._on_message)
        self.channel = channel

    def holds(self, lease: Lease) -> bool:
        """Whether `lease` is this consumer's newest claim and its channel is still open: as
        far as this process can tell without the database, the partition is still its own."""
        channel = self._lease_channel
        return self.lease == lease and channel is not None and not channel.is_closed

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        if self._closing:
            return  # neither acked nor rejected: the channel's close returns it, in order
        received = datetime.now(UTC)
        try:
            body = json.loads(message.body)
            key = self.key_of(body)
        except (ValueError, KeyError, TypeError):
            logger.error("dropping a malformed message on partition {}", self.k)
            await _settle(message.reject())
            return
        self._inflight += 1
        self._idle.clear()
        try:
            lease = await self._lease_for(message, received)
            if lease is None:
                await _settle(message.nack(requeue=True))
                return
            await self._chats(key, functools.partial(self._work, message, body, lease))
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def _lease_for(
        self, message: AbstractIncomingMessage, received: datetime
    ) -> Lease | None:
        """The lease this message runs under: claimed with the first message of its channel
        (retried while the database is away and the channel open). None: not to be run here
        (its channel closed, or a newer claim exists)."""
        channel = message.channel
        async with self._claiming:
            while self._lease_channel is not channel:
                if channel.is_closed:
                    return None
                try:
                    lease = await self.claim(self.k, received)
                except Exception as exc:
                    logger.warning("partition {}: claim failed, retrying: {}", self.k, exc)
                    await asyncio.sleep(self.RETRY_PAUSE)
                    continue
                if lease is None:
                    logger.warning(
                        "partition {}: claimed by another worker after this delivery; left to it",
                        self.k,
                    )
                    return None
                self.lease, self._lease_channel = lease, channel
                logger.info("partition {} claimed (epoch {})", self.k, lease.epoch)
            return self.lease

    async def _work(
        self, message: AbstractIncomingMessage, body: dict[str, Any], lease: Lease
    ) -> None:
        if message.channel.is_closed:
            return  # it went back to the queue with its channel; the next consumer has it
        token = current_lease.set(lease)
        try:
            await self.handler(body)
        except Fenced as exc:
            logger.warning("partition {}: {}; the message is left to the new owner", self.k, exc)
            await _settle(message.nack(requeue=True))
            return
        except Exception as exc:
            await self._failed(message, exc)
            return
        finally:
            current_lease.reset(token)
        await _settle(message.ack())
        self.handled += 1

    async def _failed(self, message: AbstractIncomingMessage, exc: Exception) -> None:
        """The handler raised: back to the queue after a pause (its chat's next messages wait
        behind it), or rejected once it failed MAX_DELIVERIES times."""
        count = (message.headers or {}).get("x-delivery-count") or 0  # a quorum queue's count
        deliveries = (int(count) if isinstance(count, int | float | str | Decimal) else 0) + 1
        if deliveries >= self.MAX_DELIVERIES:
            logger.opt(exception=exc).error(
                "partition {}: a message failed {} times; rejected: {:.200}",
                self.k,
                deliveries,
                message.body.decode(errors="replace"),
            )
            await _settle(message.reject())
            return
        logger.opt(exception=exc).error(
            "partition {}: handling a message failed (delivery {}); it goes back to the queue",
            self.k,
            deliveries,
        )
        self.returned += 1
        await asyncio.sleep(self.RETRY_PAUSE)
        await _settle(message.nack(requeue=True))

    async def release(self) -> None:
        self._closing = True
        await self._idle.wait()
        if self.channel is not None:
            channel, self.channel = self.channel, None
            await channel.close()
