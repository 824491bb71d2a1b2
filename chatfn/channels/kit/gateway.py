"""A platform's gateway: the WebSocket a channel's events come over, read by an object of its
own for the channel (a gateway class per platform), which it tells when it is up or down
(`Lifecycle`). What every such gateway holds is declared here once: the API that hands out its
URL, the channel's settings, the HTTP session the socket is opened with, where its events go
(`dispatch`), the channel, the session it resumes and the socket it reads now (`HeldSocket`:
closed when the channel stops); and the heartbeat it runs beside each connection's reading,
stopped when that connection ends (`beating`). The protocol (hello, identify, resume,
sequence numbers, close codes) is the platform's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Generic, TypeVar

import aiohttp

from chatfn.channels.kit.channel import Lifecycle
from chatfn.channels.kit.wire import HeldSocket

__all__ = ["GatewaySocket"]

A = TypeVar("A")
S = TypeVar("S")
D = TypeVar("D")


class GatewaySocket(HeldSocket, Generic[A, S, D]):
    """One gateway session of a channel (module docstring): `api` (A), `cfg` (S), `session`,
    `dispatch` (D), `channel`, `session_id` (None: identify afresh)."""

    def __init__(
        self,
        api: A,
        settings: S,
        session: aiohttp.ClientSession,
        dispatch: D,
        channel: Lifecycle,
    ) -> None:
        self.api = api
        self.cfg = settings
        self.session = session
        self.dispatch = dispatch
        self.channel = channel
        self.session_id: str | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self.setup()

    def setup(self) -> None:  # noqa: B027 - optional hook
        """The platform's own state of a new gateway (sequence numbers, counters)."""

    @contextlib.asynccontextmanager
    async def beating(self, heartbeat: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
        """Run `heartbeat` (the platform's pings on the open socket) while the block reads the
        connection; it is stopped when the block ends, however it ends."""
        beat = asyncio.ensure_future(heartbeat)
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
