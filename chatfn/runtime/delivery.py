"""Delivery: the one way out for every message the bot sends, and the front of the outbox.

Function messages, the model's answer, slash-command results, the chat fallback, reminders and
welcomes all come through `deliver`: written to the outbox and the chat's history (one
transaction, off the event loop), published to event subscribers (HTTP /v1/events), then
handed to the request waiting for it (`sink`) or to the outbound sender of its platform (the
channel registered for it). It is marked delivered only when one of them took it; until then
it waits in the outbox (chatfn/runtime/outbox.py). A worker (the switch's `relay`) writes the same
rows, then relays the message with its event id to the gateway, which runs `pass_on`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from chatfn.common.config import CoreSettings
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage, image_label
from chatfn.common.metrics import Metrics
from chatfn.runtime.delivery_policy import DeliveryPolicy
from chatfn.runtime.event_stream import EventQueue
from chatfn.runtime.outbox import Outbox
from chatfn.runtime.switch import Switch
from chatfn.storage.db import Storage

ReplySink = Callable[[OutgoingMessage], Awaitable[None]]


class OutboundChannel(Protocol):
    platform: str

    async def send(self, message: OutgoingMessage) -> None: ...


class Delivery:
    """Outbound senders by platform, event subscribers, the outbox, and the path between."""

    def __init__(
        self, settings: CoreSettings, storage: Storage, metrics: Metrics, switch: Switch
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.switch = switch
        self.channels: dict[str, OutboundChannel] = {}
        self._subscribers: set[EventQueue] = set()
        self.outbox = Outbox(storage, settings.storage.outbox, self.channels, self._history_values)
        self.outbox.policy = DeliveryPolicy.from_settings(settings)

    def register(self, channel: OutboundChannel) -> None:
        """`channel` takes the outbox's deliveries for its platform."""
        self.channels[channel.platform] = channel

    def subscribe(self, *, wake_only: bool = False) -> EventQueue:
        """A queue receiving every message the bot sends, to any chat (HTTP /v1/events);
        `wake_only`: for a reader that reads the outbox table and only wants waking."""
        queue = EventQueue(maxsize=1000, wake_only=wake_only)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: EventQueue) -> None:
        self._subscribers.discard(queue)

    def publish(self, out: OutgoingMessage) -> None:
        """Hand a stored message to the event subscribers (the HTTP channel, for a message
        its outbox drain passes on: that path does not publish)."""
        for queue in self._subscribers:
            queue.offer(out)  # never blocks the bot; what a stalled reader misses is noted

    def _history_values(self, out: OutgoingMessage, message_id: str = "") -> dict[str, Any]:
        """The history row of a message the bot sends, written with its outbox row;
        `message_id` keys a worker's reply (`<incoming id>#<position>`)."""
        return {
            "platform": out.platform,
            "chat_id": out.chat_id,
            "role": "notice" if out.notice else "assistant",
            "sender_id": "bot",
            "sender_name": self.settings.bot.name,
            "text": "\n".join(
                [out.text, *(f"[image: {image_label(i)}]" for i in out.images)]
            ).strip(),
            "is_group": out.is_group,
            "message_id": message_id,
            "thinking": out.thinking,
        }

    async def deliver(self, out: OutgoingMessage, sink: ReplySink | None = None) -> None:
        """The one path every outgoing message takes (see the module docstring)."""
        self.metrics.messages_out.labels(out.platform).inc()
        relay = self.switch.relay
        if relay is not None:  # worker: stored by the relay, sent by the gateway
            await relay(out, sink)
            return
        await self.outbox.write(out)
        await self.pass_on(out, sink)

    async def pass_on(self, out: OutgoingMessage, sink: ReplySink | None = None) -> None:
        """Hand a stored message (`out.event_id` set) to event subscribers, then to `sink` or
        its platform's channel, and mark its row: the second half of `deliver`, which a
        gateway runs for the messages its workers stored."""
        self.publish(out)
        if sink is None:
            await self.outbox.dispatch(out)
            return
        try:
            await sink(out)
        except NotDelivered as exc:  # e.g. the OneBot account went offline mid-reply
            await self.outbox.finish(out, "pending", rest=exc.rest)
            await self.outbox.dispatch(out, exc)  # at once, or when the delivery policy says
            return
        except DeliveryRefused:  # logged by the channel; the reply is in the history
            await self.outbox.finish(out, "failed")
            return
        except BaseException:
            await self.outbox.finish(out, "failed")
            raise
        await self.outbox.finish(out, "delivered")
