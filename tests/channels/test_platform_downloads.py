"""A platform's image download (the kit's `fetch_image`: QQ, Slack, ...) reads the body to its
end and refuses one over the limit: `content.read(n)` returned only what had arrived, so an
image sent in two writes reached the model cut in half."""

from __future__ import annotations

import asyncio
import base64

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from chatfn.channels.kit import fetch_image

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400  # about 100 KB


async def _two_writes(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "image/png"})
    await response.prepare(request)
    half = len(PNG) // 2
    await response.write(PNG[:half])
    await asyncio.sleep(0.1)  # the second half arrives later, as over a slow network
    await response.write(PNG[half:])
    await response.write_eof()
    return response


async def _served(app: web.Application) -> TestServer:
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    return server


async def test_an_image_sent_in_two_writes_is_read_whole() -> None:
    app = web.Application()
    app.router.add_get("/img", _two_writes)
    server = await _served(app)
    try:
        async with aiohttp.ClientSession() as session:
            uri = await fetch_image(session, str(server.make_url("/img")), mime="image/png")
    finally:
        await server.close()
    assert uri is not None
    assert base64.b64decode(uri.split(",", 1)[1]) == PNG


async def test_an_image_over_the_limit_is_refused_while_it_streams() -> None:
    app = web.Application()
    app.router.add_get("/img", _two_writes)
    server = await _served(app)
    try:
        async with aiohttp.ClientSession() as session:
            uri = await fetch_image(session, str(server.make_url("/img")), max_bytes=60_000)
    finally:
        await server.close()
    assert uri is None
