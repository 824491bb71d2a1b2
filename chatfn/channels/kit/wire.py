"""What comes over the wire from a platform, read the same way everywhere: a webhook's body
(whole, within a limit) and a socket's text frames, as JSON objects; anything else is skipped
with a warning (a hostile or broken frame never ends the connection)."""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web
from loguru import logger

from chatfn.common.fetch import FetchTooLarge, read_limited

__all__ = [
    "HeldSocket",
    "json_frames",
    "json_object",
    "same_secret",
    "webhook_body",
    "webhook_bytes",
]


async def webhook_body(request: web.Request, limit: int) -> bytes | None:
    """A webhook request's whole body (`common.fetch.read_limited`: to its end, so a body in
    several TCP segments is not cut short and refused for its signature); None once it passes
    `limit` bytes, declared or sent (answer 413)."""
    try:
        return await read_limited(request, limit)
    except FetchTooLarge:
        return None


async def webhook_bytes(request: web.Request, limit: int) -> bytes:
    """`webhook_body`, answering 413 itself once the body passes `limit` bytes."""
    body = await webhook_body(request, limit)
    if body is None:  # how large it is was not read: more than `limit`
        raise web.HTTPRequestEntityTooLarge(limit, limit + 1, text="too large")
    return body


def same_secret(given: str, expected: str) -> bool:
    """Whether a request's `given` secret (a header, a token in the body) is `expected`,
    compared in constant time (no timing tells an attacker how much of it was right)."""
    return hmac.compare_digest(given.encode(errors="replace"), expected.encode())


def json_object(body: bytes | str) -> dict[str, Any] | None:
    """`body` as a JSON object; None when it is not one (answer 400)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def json_frames(
    ws: aiohttp.ClientWebSocketResponse, what: str
) -> AsyncIterator[dict[str, Any]]:
    """The socket's text frames that are JSON objects, until it closes; `what` names the
    socket in the warning about a frame that is not one."""
    async for frame in ws:
        if frame.type != aiohttp.WSMsgType.TEXT:
            continue
        payload = json_object(frame.data)
        if payload is None:
            logger.warning("{} frame that is not a JSON object ignored", what)
            continue
        yield payload


class HeldSocket:
    """The WebSocket a gateway reads now (`_ws`, set while it is open): closed when the
    channel stops, or dropped as a network failure would drop it (tests: the gateway then
    connects again and resumes its session)."""

    _ws: aiohttp.ClientWebSocketResponse | None = None

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()

    async def drop(self) -> None:
        """Close the socket with 4000 (no close code of a platform's), as a drop would."""
        if self._ws is not None:
            await self._ws.close(code=4000)
