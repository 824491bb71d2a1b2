"""A file server on 127.0.0.1 that misbehaves on purpose, for the fetch tests: an image that
trickles (a PNG header, a declared 5 MB, then one byte every `interval` seconds, for as long
as the client stays), a body without end, a body sent in two writes, a redirect to anywhere,
one to itself.

    async with SlowFiles(interval=1.0) as files:
        files.url + "/trickle/1.png"
        files.trickling            # trickles in progress now
        files.dropped              # trickles whose client went away
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from tests.fakes.images import png
from tests.kit import bound_port

DECLARED = 5 * 1024 * 1024
TWO_PARTS = b"A" * 100_000 + b"B" * 100_000


class SlowFiles:
    def __init__(self, *, interval: float = 1.0) -> None:
        self.interval = interval
        self.trickling = 0
        self.dropped = 0
        self.requests: list[str] = []
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> SlowFiles:
        app = web.Application()
        app.router.add_get("/cat.png", self._cat)
        app.router.add_get("/trickle/{n}.png", self._trickle)
        app.router.add_get("/endless", self._endless)
        app.router.add_get("/two-parts", self._two_parts)
        app.router.add_get("/redirect", self._redirect)
        app.router.add_get("/loop", self._loop)
        app.router.add_get("/page", self._page)
        app.middlewares.append(self._record)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = bound_port(site)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        await self.stop()

    async def stop(self) -> None:
        """End every trickle (its connection is closed) and the server."""
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        response: web.StreamResponse = await handler(request)
        return response

    async def _cat(self, _request: web.Request) -> web.Response:
        return web.Response(body=png(), content_type="image/png")

    async def _page(self, _request: web.Request) -> web.Response:
        return web.Response(text="<html>not an image</html>", content_type="text/html")

    async def _redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def _loop(self, _request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def _trickle(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "image/png", "Content-Length": str(DECLARED)}
        )
        await response.prepare(request)
        self.trickling += 1
        try:
            await response.write(png()[:16])
            while not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval)
                await response.write(b"0")
        except ConnectionError:  # the client went away
            self.dropped += 1
        finally:
            self.trickling -= 1
        if request.transport is not None:
            request.transport.close()  # stopped: the declared 5 MB never come
        return response

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            while not self._stopping.is_set():
                await response.write(b"x" * 65536)
        except ConnectionError:
            self.dropped += 1
        return response

    async def _two_parts(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/html", "Content-Length": str(len(TWO_PARTS))}
        )
        await response.prepare(request)
        await response.write(TWO_PARTS[:100_000])
        await asyncio.sleep(0.1)
        await response.write(TWO_PARTS[100_000:])
        await response.write_eof()
        return response
