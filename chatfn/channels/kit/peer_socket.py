"""What a server socket that peers connect to needs beside the framework: whether a peer may
connect (a shared token), and whether it still reads what is written to it.

- `token_refusal`: the token as `Authorization: Bearer|Token <t>` or `?access_token=`; 401
  without one, 403 with a wrong one (compared in constant time).
- `PeerSocket`: one peer's server-side WebSocket, with what a request/response protocol over
  it keeps (answers awaited by id, the write lock, the frames waiting to be written).
- `Peers`: the open socket of each peer that connected (a peer connecting again replaces its
  old one), and a wait for a peer that is away to come back.
- `unsent`: bytes written that the peer has not taken, in the transport's buffer and (Linux)
  the kernel's send queue, where megabytes fit before a write blocks: a peer that stopped
  reading shows here long before a write fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import web

__all__ = ["PeerSocket", "Peers", "token_refusal", "unsent"]

try:  # POSIX only: elsewhere the transport's own buffer is all that is known
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]


def token_refusal(request: web.Request, token: str | None) -> web.Response | None:
    """None when the request may connect (or no token is set), else the refusal."""
    if not token:
        return None
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # "Token" is what older clients send beside the standard "Bearer".
    if scheme.lower() not in ("bearer", "token"):
        given = request.query.get("access_token", "")
    if not given:
        return web.json_response({"error": "access token required"}, status=401)
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return web.json_response({"error": "wrong access token"}, status=403)
    return None


def _kernel_unsent(transport: asyncio.BaseTransport) -> int:
    """Bytes in the socket's kernel send queue not yet acknowledged (Linux SIOCOUTQ); 0 where
    that cannot be asked."""
    sock = transport.get_extra_info("socket")
    if sock is None or fcntl is None or not hasattr(termios, "TIOCOUTQ"):
        return 0
    try:
        out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    except OSError:
        return 0
    return int(struct.unpack("i", out)[0])


def unsent(transport: asyncio.BaseTransport | None) -> int:
    """Bytes written to `transport` that the peer has not taken; 0 once it is closing."""
    if not isinstance(transport, asyncio.WriteTransport) or transport.is_closing():
        return 0
    return transport.get_write_buffer_size() + _kernel_unsent(transport)


@dataclass(slots=True, kw_only=True)
class PeerSocket:
    """One peer's socket (module docstring)."""

    ws: web.WebSocketResponse
    pending: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The TCP transport under the socket: its unsent bytes tell a peer that stopped reading.
    transport: asyncio.Transport | None = None
    queued: int = 0  # frames waiting to be written

    @property
    def gone(self) -> bool:
        """Closed, or aborted and about to be dropped."""
        return self.ws.closed or (self.transport is not None and self.transport.is_closing())

    def unsent(self) -> int:
        """Bytes written to the socket that the peer has not taken (`unsent`)."""
        return unsent(self.transport)


class _Socket(Protocol):
    @property
    def gone(self) -> bool: ...


C = TypeVar("C", bound=_Socket)


class Peers(dict[str, C]):
    """Peer id -> its open socket, in the order they connected."""

    def __init__(self) -> None:
        super().__init__()
        self._back: dict[str, asyncio.Event] = {}

    def _event(self, peer: str) -> asyncio.Event:
        return self._back.setdefault(peer, asyncio.Event())

    def put(self, peer: str, socket: C) -> C | None:
        """`socket` is the peer's now; the one it replaces (to close), if any."""
        old = self.get(peer)
        self[peer] = socket
        self._event(peer).set()
        return old if old is not socket else None

    def drop(self, peer: str, socket: C) -> bool:
        """Forget `socket` unless a newer one replaced it already; whether it was forgotten."""
        if self.get(peer) is not socket:
            return False
        del self[peer]
        self._event(peer).clear()
        return True

    async def wait(self, peer: str, seconds: float) -> C | None:
        """The peer's open socket, waiting up to `seconds` for it to (re)connect; None when it
        stays away. A socket closing but not yet dropped counts as gone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            socket = self.get(peer)
            if socket is not None and not socket.gone:
                return socket
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            event = self._event(peer)
            if socket is not None or event.is_set():
                await asyncio.sleep(min(0.05, remaining))  # closing: wait for the drop
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await event.wait()
