"""The online probe a channel on the kit gets from its own `connect()` (`connects`).

Why: `check_system.py --online` and the console's "test" button ask the platform "who am I".
The channel already asks exactly that at start, in `connect()`, with the client, URL, timeouts
and error sentences the bot runs with. A probe written beside it was a second copy of that call
and of its error mapping, and could pass where the bot then failed (another client, another
timeout) or say the refusal in other words than the log line. With `connects`, the probe builds
the channel as the bot does (its factory, its settings) on a host that runs nothing
(`ProbeHost`), runs its `connect()` and then its `close()`: ✓ with what `connect` says (what
the bot logs at start), ✗ with the sentence of the `CredentialsRefused` or `Unreachable` it
raised (naming the key to fix).

A channel whose `connect()` changes something on the platform (a password login makes a new
device, a server waits for peers) keeps a probe of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from chatfn.channels.kit.declare import asked
from chatfn.common.config import CoreSettings
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.common.metrics import Metrics
from chatfn.runtime.channel_host import ChannelHost, DeliveryPolicy, Probe, WebHandler, WebListener

__all__ = ["ProbeHost", "connects"]

S = TypeVar("S")


class Connects(Protocol):
    """What `connects` drives: a built channel's connect and close."""

    async def connect(self) -> str | None: ...

    async def close(self) -> None: ...


class ProbeHost:
    """A `ChannelHost` for a channel that is built only to connect once: it takes no messages,
    keeps no state and serves no route (a webhook route is accepted and never served)."""

    def __init__(self) -> None:
        self.settings = CoreSettings()
        self.metrics = Metrics()
        self.delivery_policy = DeliveryPolicy()

    def register(self, sender: Any) -> None:
        pass

    def kick(self) -> None:
        pass

    def add_web_route(self, method: str, path: str, handler: WebHandler) -> None:
        pass

    def web_listener(self, name: str) -> WebListener:
        raise RuntimeError(f"the {name} channel serves its own address: it has a probe of its own")

    async def handle(self, msg: IncomingMessage, *args: Any, **kw: Any) -> list[OutgoingMessage]:
        raise RuntimeError("a channel built to be probed takes no messages")

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]:
        return []

    async def recent_chats(self, platform: str, since: datetime) -> list[tuple[str, datetime]]:
        return []

    async def was_stored(self, platform: str, chat_id: str, message_id: str) -> bool:
        return False

    async def load_state(self, platform: str, key: str) -> str | None:
        return None

    async def save_state(self, platform: str, key: str, value: str | None) -> None:
        pass


def connects(
    build: Callable[[ChannelHost, S], Connects], name: str
) -> Callable[[S], Awaitable[Probe]]:
    """The online probe named `name` ("channel NAME getMe") of the channel `build` makes
    (the declaration's factory): the channel's own `connect()`, then its `close()`."""

    async def probe(settings: S) -> Probe:
        channel = build(ProbeHost(), settings)

        async def ask() -> str:
            return await channel.connect() or "connected"

        return await asked(name, ask, close=channel.close)

    return probe
