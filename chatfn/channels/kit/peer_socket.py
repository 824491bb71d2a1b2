"""What a server socket that peers connect to needs beside the framework: whether a peer may
connect (a shared token), and whether it still reads what is written to it.

- `token_refusal`: the token as `Authorization: Bearer|Token <t>` or `?access_token=`; 401
  without one, 403 with a wrong one (compared in constant time).
- `unsent`: bytes written that the peer has not taken, in the transport's buffer and (Linux)
  the kernel's send queue, where megabytes fit before a write blocks: a peer that stopped
  reading shows here long before a write fails.
"""

from __future__ import annotations

import asyncio
import hmac
import struct

from aiohttp import web

__all__ = ["token_refusal", "unsent"]

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
