"""The end of a channel whose events come over a gateway (`gateway.GatewaySocket`): the socket
closed first, so no event arrives while the rest stops, then what the channel settles
(`settle`), then the HTTP session the gateway and the API shared. `drop_connection` cuts the
socket (tests): the gateway reconnects and resumes as after a real drop."""

from __future__ import annotations

from typing import Any

import aiohttp

from chatfn.channels.kit.gateway import GatewaySocket

__all__ = ["GatewayChannel"]


class GatewayChannel:
    """Mixed into a platform channel (before `PlatformChannel`) that sets `gateway` in `serve`
    and `_http` in `connect`."""

    gateway: GatewaySocket[Any, Any, Any] | None = None
    _http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self.gateway is not None:
            await self.gateway.close()
        await self.settle()
        if self._http is not None:
            await self._http.close()

    async def settle(self) -> None:
        """What the channel finishes between its socket closing and its HTTP session closing
        (state kept on disk); nothing by default."""

    async def drop_connection(self) -> None:
        """Cut the gateway's socket (tests): the channel reconnects and resumes."""
        if self.gateway is not None:
            await self.gateway.drop()
