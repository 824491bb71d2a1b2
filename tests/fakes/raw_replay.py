"""A replay server that can also cut a stream off, and the SSE/JSON reply helpers around it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.fakes.cassette import ReplayServer

RawHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RawReplayServer(ReplayServer):
    """ReplayServer whose queue may also hold `raw(handler)` entries that get the aiohttp request
    itself, so a test can write half a stream and drop the connection (the stock scripted
    handlers only see the recorded request and must return a whole response)."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.queue and getattr(self.queue[0], "raw_handler", False):
            handler = self.queue.pop(0)
            await request.read()
            response = await handler(request)  # type: ignore[operator,misc]
            return response
        return await super()._handle(request)


def raw(handler: RawHandler) -> RawHandler:
    handler.raw_handler = True  # type: ignore[attr-defined]
    return handler


def cut_off_after(body: str, content_type: str = "text/event-stream") -> RawHandler:
    """A handler that sends `body` as the start of a stream, then drops the connection."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        await response.write(body.encode())
        assert request.transport is not None
        request.transport.close()
        return response

    return raw(handler)


def sse(events: list[dict[str, Any]], *, named: bool = True) -> str:
    """Server-Sent Events text: Anthropic names each event, Gemini sends bare `data:` lines."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out)


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None):
    """A scripted handler answering one JSON body."""

    def handler(_received: Any) -> web.Response:
        return web.json_response(body, status=status, headers=headers)

    return handler


def sse_reply(text: str):
    def handler(_received: Any) -> web.Response:
        return web.Response(text=text, content_type="text/event-stream")

    return handler
