"""What a server socket that peers connect to needs beside the framework: whether a peer may
connect (a shared token), and whether it still reads what is written to it.

- `token_refusal`: the token as `Authorization: Bearer|Token <t>` or `?access_token=`; 401
  without one, 403 with a wrong one (compared in constant time).
- `PeerSocket`: one peer's server-side WebSocket, with what a request/response protocol over
  it keeps (answers awaited by id, the write lock, the frames waiting to be written). Its
  writes are bounded, so a peer that stops reading holds nothing else: at most `limit` frames
  wait (more are refused at once), a frame waits at most `timeout` to be written, and a socket
  whose writes do not drain in that time, or whose request went unanswered while
  `STALLED_BYTES` of ours sit unread, is aborted (PeerGone).
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
from loguru import logger

__all__ = [
    "STALLED_BYTES",
    "NoAnswer",
    "PeerGone",
    "PeerSocket",
    "Peers",
    "token_refusal",
    "unsent",
]

try:  # POSIX only: elsewhere the transport's own buffer is all that is known
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]


# A request unanswered in time while this many of our bytes are not taken by the peer: the
# peer stopped reading (a slow one leaves less behind than this on a healthy network).
STALLED_BYTES = 16 * 1024


class PeerGone(Exception):
    """The peer's socket is closed or not taking data; `in_flight`: the frame went (partly)
    out first, so the peer may have acted on it."""

    def __init__(self, why: str, *, in_flight: bool = False) -> None:
        super().__init__(why)
        self.in_flight = in_flight


class NoAnswer(Exception):
    """No answer in time: what was asked may or may not have been done."""


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

    #: Who the peer is, in log lines.
    name: str = "peer"

    def unsent(self) -> int:
        """Bytes written to the socket that the peer has not taken (`unsent`)."""
        return unsent(self.transport)

    def check(self, limit: int) -> None:
        """PeerGone (not in flight) when closed or `limit` frames wait already."""
        if self.gone:
            raise PeerGone("is not connected")
        if self.queued >= limit:
            raise PeerGone(f"has {self.queued} frames waiting to be written")

    async def write(self, frame: str, timeout: float, limit: int) -> None:
        """Write one frame, bounded (module docstring)."""
        self.check(limit)
        self.queued += 1
        writing = False
        try:
            async with asyncio.timeout(timeout):
                async with self.send_lock:
                    if self.gone:
                        raise PeerGone("disconnected")
                    writing = True
                    await self.ws.send_str(frame)
        except TimeoutError:
            if writing:
                self.abort(f"a frame was not written within {timeout:g} s")
            raise PeerGone("the socket is not taking data", in_flight=writing) from None
        except (ConnectionError, RuntimeError) as exc:  # closed under us while writing
            raise PeerGone(str(exc) or "connection closed", in_flight=writing) from None
        finally:
            self.queued -= 1

    async def answer(self, fut: asyncio.Future[dict[str, Any]], timeout: float) -> dict[str, Any]:
        """The answer to a request that went out: NoAnswer in time, or PeerGone (in flight)
        when the socket dropped first or the peer stopped reading (then it is aborted)."""
        try:
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            if (waiting := self.unsent()) >= STALLED_BYTES:
                self.abort(f"unanswered and {waiting} bytes not taken")
                raise PeerGone("the peer stopped reading its socket", in_flight=True) from None
            raise NoAnswer("no response in time") from None
        except (ConnectionError, RuntimeError, PeerGone) as exc:  # closed under us
            raise PeerGone(str(exc) or "connection closed", in_flight=True) from None

    async def request(
        self, key: str, frame: str, *, write_within: float, answer_within: float, limit: int
    ) -> dict[str, Any]:
        """Write `frame` and wait for the answer the reader files under `key` (`answered`)."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[key] = fut  # before the write: the answer may come while it drains
        try:
            await self.write(frame, write_within, limit)  # PeerGone.in_flight: it went out
            return await self.answer(fut, answer_within)
        finally:
            self.pending.pop(key, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: a drop after a refused write is not an error

    def answered(self, key: str, answer: dict[str, Any]) -> None:
        """The answer to the request `key` came (one nobody waits for any more is dropped)."""
        fut = self.pending.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def abort(self, why: str) -> None:
        """Drop a socket whose peer stopped reading: its buffered bytes are discarded and its
        waiting requests fail; its messages wait in the outbox until it reconnects."""
        if self.transport is None or self.transport.is_closing():
            return
        logger.warning(
            "{} is not reading its socket ({}): closing it; its messages wait in the outbox "
            "until it reconnects",
            self.name,
            why,
        )
        self.transport.abort()

    def closed(self) -> None:
        """The socket ended: every request still waiting fails (PeerGone)."""
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(PeerGone("connection closed"))
        self.pending.clear()


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
