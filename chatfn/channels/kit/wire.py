"""What comes over the wire from a platform, read the same way everywhere: a webhook's body
and a socket's text frames, as JSON objects; anything else is skipped with a warning (a
hostile or broken frame never ends the connection)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from loguru import logger

__all__ = ["json_frames", "json_object"]


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
