"""Ports in tests: a server binds port 0 and reports the port the system gave it.

Probing for a free port (bind, read the number, close) and binding it later leaves a window in
which another test, on the other xdist worker, can take it: the second bind then fails, or
worse, the test talks to the other test's server. So every server a test runs in its own
process binds port 0 (`serve`, `bound_port`). `free_port` is only for a real program that must
be told its port before it starts (Synapse's homeserver.yaml, a subprocess's config); prefer
letting such a program bind port 0 and report it, where it can.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web


def bound_port(site: web.BaseSite | Any) -> int:
    """The port a started aiohttp site (a TCPSite on port 0) is listening on."""
    server = site._server  # aiohttp keeps the asyncio Server here; no public accessor
    if server is None or not server.sockets:
        raise RuntimeError("the site is not started")
    return int(server.sockets[0].getsockname()[1])


async def serve(
    app: web.Application, host: str = "127.0.0.1", **runner_kwargs: Any
) -> tuple[web.AppRunner, int]:
    """Run `app` on `host`, port 0: (its runner, to `await runner.cleanup()`; the port).
    `runner_kwargs` go to AppRunner (`handler_cancellation=True`, `shutdown_timeout=...`)."""
    runner = web.AppRunner(app, **runner_kwargs)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, bound_port(site)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now, for a program that must be told its port before it
    starts. Racy by nature (see the module docstring): never for a server of the test's own."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


async def send_in_pieces(
    request: web.Request, data: bytes, content_type: str, piece: int = 1024
) -> web.StreamResponse:
    """Answer `data` (its length declared) in `piece`-byte writes with a pause between, as a
    file arrives over a real network: a client that reads only what has arrived so far
    (`response.content.read(n)`) gets it cut short."""
    response = web.StreamResponse(headers={"Content-Type": content_type})
    response.content_length = len(data)
    await response.prepare(request)
    for at in range(0, len(data), piece):
        await response.write(data[at : at + piece])
        await asyncio.sleep(0.005)
    await response.write_eof()
    return response
