"""Images handed to QQ by URL: the bot serves them itself, under an unguessable path that
expires (`channels.qq.public_url`).

QQ's rich-media upload (`POST /v2/{groups|users}/{id}/files`) takes a `url` QQ downloads, or
the bytes as `file_data`, which the documentation marks "not yet supported" (peers report 500s
in C2C chats). A picture the model made has no URL, so with `public_url` set (the address at
which QQ's servers reach the bot's web server) the image is put on this shelf and QQ is given
`{public_url}/qq/media/<token>`: 32 random bytes of token, served for `channels.qq.media_ttl`
seconds (QQ downloads it at once), at most `MAX_BYTES` held (the oldest go first).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from chatfn.channels import kit

__all__ = ["MAX_BYTES", "MEDIA_ROUTE", "MediaShelf"]

MEDIA_ROUTE = "/qq/media/{token}"
#: Bytes the shelf holds at most: a burst of large pictures pushes the oldest out.
MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Item:
    data: bytes
    mime: str
    until: float


class MediaShelf:
    """The images QQ may fetch now, by token."""

    def __init__(
        self,
        public_url: str,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.ttl = ttl
        self.clock = clock
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, _Item] = OrderedDict()
        self._bytes = 0

    def put(self, data: bytes) -> str:
        """The URL at which QQ can fetch `data` until the shelf's ttl has passed."""
        self._expire()
        token = secrets.token_urlsafe(32)
        mime = kit.image_mime(data) or "application/octet-stream"
        self._items[token] = _Item(data, mime, self.clock() + self.ttl)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._items) > 1:
            self._drop(next(iter(self._items)))
        return f"{self.public_url}/qq/media/{token}"

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    async def serve(self, request: web.Request) -> web.Response:
        """GET /qq/media/{token}: the image, or 404 for a token unknown or expired."""
        self._expire()
        item = self._items.get(request.match_info.get("token", ""))
        if item is None:
            raise web.HTTPNotFound()
        return web.Response(
            body=item.data,
            content_type=item.mime,
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    def _expire(self) -> None:
        now = self.clock()
        for token in [t for t, item in self._items.items() if item.until <= now]:
            self._drop(token)

    def _drop(self, token: str) -> None:
        item = self._items.pop(token, None)
        if item is not None:
            self._bytes -= len(item.data)
