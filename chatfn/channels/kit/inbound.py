"""The way in, the same on every platform: per-chat order, intake, confirm once stored.

A platform reads an event and names its chat; `Inbound` queues the work in that chat's order
(a chat's messages are handled in the order they came, chats run concurrently), hands the
message to the bot (`host.handle`, replies through the channel's sink), and says when the
platform may be told the message is taken (`Taken`, chatfn/channels/intake.py: once it is
stored, not when it is read). One failing message is logged and does not stop its chat's
queue; a message whose handling failed before it was stored is released, to be taken again
when the platform delivers it again.

`once(key, take)` recognises an event the platform sends twice (a resend, a message that comes
as two events) by its key, remembering the last `remember` keys.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, Protocol

from chatfn.channels.intake import Taken, settle_after
from chatfn.channels.outbound import OrderedRunner
from chatfn.common.messages import (
    IncomingMessage,
    OutgoingMessage,
    StreamObserver,
    SystemEvent,
)
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["Inbound"]

Read = Callable[[], Awaitable[IncomingMessage | None]]
Events = Callable[[], Awaitable[Iterable[SystemEvent]]]
Sink = Callable[[OutgoingMessage], Awaitable[None]]


class _Channel(Protocol):
    """What the way in uses of its channel (a `PlatformChannel`)."""

    platform: str
    host: ChannelHost
    log: Any  # its logger

    @property
    def label(self) -> str: ...

    @property
    def skip_stored(self) -> bool: ...

    def track(self, task: asyncio.Future[Any]) -> None: ...

    async def deliver(self, message: OutgoingMessage) -> None: ...


class Inbound:
    """Per-chat order and intake for one channel (module docstring)."""

    __slots__ = ("channel", "order", "remember", "seen")

    def __init__(self, channel: _Channel, remember: int = 5000) -> None:
        self.channel = channel
        self.order = OrderedRunner()
        self.seen: OrderedDict[Hashable, Taken | None] = OrderedDict()
        self.remember = remember

    def once(self, key: Hashable, take: Callable[[Taken | None], Taken]) -> Taken:
        """`take(previous)` for an event seen the first time (or released earlier and due to
        be taken again: `previous` is that take); for one seen before, what it came to."""
        seen = self.seen.get(key)
        if seen is not None and not seen.retake():
            return seen
        taken = take(seen)
        self.note(key, taken)
        return taken

    def message_once(
        self, chat: Hashable, ident: str, read: Read, key: Hashable | None = None
    ) -> Taken:
        """`message` for an event the platform may deliver again (a webhook retried, events
        read again after a restart): queued the first time `key` (default: `ident`) is seen
        or when the take before it was released, settled once stored; a repeat gets what the
        first came to."""
        return self.once(ident if key is None else key, lambda p: self.take(chat, ident, read, p))

    def take(self, chat: Hashable, ident: str, read: Read, previous: Taken | None) -> Taken:
        """`message`, settling what it returns once stored: the take of an event seen once
        (`once`), after `previous` (the take released before it, if any)."""
        taken = Taken(previous)
        self.message(chat, ident, read, taken)
        return taken

    def take_events(self, chat: Hashable, read: Events, previous: Taken | None) -> Taken:
        """`events`, settling what it returns once they are handled (as `take`)."""
        taken = Taken(previous)
        self.events(chat, read, taken)
        return taken

    def first_sight(self, key: Hashable) -> bool:
        """Whether `key` is new (then remembered): a platform that does not confirm."""
        if key in self.seen:
            return False
        self.note(key)
        return True

    def note(self, key: Hashable, taken: Taken | None = None) -> None:
        """Remember `key` (and what it came to), forgetting the oldest past `remember`."""
        self.seen[key] = taken
        if len(self.seen) > self.remember:
            self.seen.popitem(last=False)

    def message(
        self,
        chat: Hashable,
        ident: str,
        read: Read,
        taken: Taken | None = None,
        sink: Sink | None = None,
        stream: StreamObserver | None = None,
    ) -> asyncio.Future[None]:
        """Queue a message of `chat` (platform id `ident`): `read()` builds its
        IncomingMessage (None: nothing to answer), which the bot handles, its replies going
        to `sink` (default: the channel's `deliver`) and the answer's text as it is written
        to `stream` (a platform that shows it growing); `taken` settles once it is stored.
        Returns the job's task."""
        job = functools.partial(self._message, chat, ident, read, taken, sink, stream)
        if taken is None:
            return self._queue(chat, job)
        return self._queue(chat, lambda: settle_after(taken, job()))

    def events(
        self, chat: Hashable, read: Events, taken: Taken | None = None
    ) -> asyncio.Future[None]:
        """Queue system events of `chat` (a member joined) in its order: a welcome goes out
        before the answer to the newcomer's first message."""
        if taken is None:
            return self._queue(chat, lambda: self._events(chat, read))
        return self._queue(chat, lambda: settle_after(taken, self._events(chat, read)))

    def _queue(self, chat: Hashable, job: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        task = self.order.submit(chat, job)
        self.channel.track(task)
        return task

    async def _message(
        self,
        chat: Hashable,
        ident: str,
        read: Read,
        taken: Taken | None,
        sink: Sink | None,
        stream: StreamObserver | None = None,
    ) -> None:
        channel = self.channel
        host = channel.host
        try:
            if (
                channel.skip_stored
                and ident
                and await host.was_stored(channel.platform, str(chat), ident)
            ):
                channel.log.debug(
                    "{} message {} in {} was handled before: skipped", channel.label, ident, chat
                )
                return
            msg = await read()
            if msg is None:
                return
            await host.handle(
                msg,
                sink or channel.deliver,
                on_stream=stream,
                on_stored=None if taken is None else taken.settle,
            )
        except Exception as exc:  # one failing message must not stop the chat's queue
            channel.log.opt(exception=exc).error(
                "{} message {} in {} failed", channel.label, ident, chat
            )
            if taken is not None and not taken.release():  # not stored: taken again later
                channel.log.error(
                    "{} message {} given up after {} tries", channel.label, ident, taken.take
                )

    async def _events(self, chat: Hashable, read: Events) -> None:
        channel = self.channel
        try:
            for event in await read():
                await channel.host.handle_event(event)
        except Exception as exc:  # one failing event must not stop the chat's queue
            channel.log.opt(exception=exc).error("{} event in {} failed", channel.label, chat)
