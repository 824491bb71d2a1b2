"""The cluster switch: whether this process runs turns itself or hands them to workers, and
whether its outgoing messages go out here or through a gateway (chatfn/runtime/cluster.py sets it).

One process with no broker leaves both empty: turns run here, messages go to the outbox and
this process's channels. A gateway sets `remote` (its `Gateway`); a worker sets `relay` (its
`Worker`): the Bot and its Delivery ask the switch, and nothing else knows the roles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from loguru import logger

from chatfn.common.messages import IncomingMessage, OutgoingMessage, StreamObserver, SystemEvent

ReplySink = Callable[[OutgoingMessage], Awaitable[None]]


def tell_stored(on_stored: Callable[[], None]) -> None:
    """Call a channel's `on_stored` (ChannelHost.handle): a channel's bug there is logged and
    must not cost the turn its answer."""
    try:
        on_stored()
    except Exception as exc:  # noqa: BLE001 - the channel's callback, not the turn's
        logger.opt(exception=exc).error("a channel's on_stored callback failed")


class Remote(Protocol):
    """Where a gateway's bot sends what it would otherwise handle itself: the turn runs in a
    worker process, the replies come back to the sink."""

    async def handle(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None,
        on_stream: StreamObserver | None,
        on_stored: Callable[[], None] | None = None,
    ) -> list[OutgoingMessage]: ...

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]: ...


class Relay(Protocol):
    """Where a worker's bot hands its outgoing messages (after storing them): to the gateway
    that holds the chat's connection, through the broker."""

    async def __call__(self, out: OutgoingMessage, sink: ReplySink | None) -> None: ...


class Switch:
    """Where turns run (`remote`: in workers) and where replies go (`relay`: to a gateway)."""

    __slots__ = ("remote", "relay")

    def __init__(self) -> None:
        self.remote: Remote | None = None
        self.relay: Relay | None = None

    @property
    def role(self) -> str:
        if self.remote is not None and self.relay is not None:
            return "gateway+worker"
        if self.remote is not None:
            return "gateway"
        return "worker" if self.relay is not None else "single process"
