"""Files a platform fetches by URL, served by the bot itself: for a platform with no upload
(it downloads an image message's URL itself), a picture the model made has
no URL, so it is put on a shelf and the platform is given `{public_url}{route}` with an
unguessable token (32 random bytes), served for `ttl` seconds, at most `max_bytes` held (the
oldest go first, so a burst of large pictures cannot fill memory)."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from aiohttp import web

from chatfn.channels.kit.images import image_mime

__all__ = ["MAX_SHELF_BYTES", "MediaShelf"]

#: Bytes a shelf holds at most by default.
MAX_SHELF_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Item:
    data: bytes
    mime: str
    until: float


class MediaShelf:
    """The files the platform may fetch now, by token; a channel's shelf names its `route`
    (a web route with `{token}`, mounted on `serve`)."""

    route: ClassVar[str] = "/media/{token}"

    def __init__(
        self,
        public_url: str,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int = MAX_SHELF_BYTES,
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.ttl = ttl
        self.clock = clock
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, _Item] = OrderedDict()
        self._bytes = 0

    def put(self, data: bytes, mime: str | None = None) -> str:
        """The URL at which the platform can fetch `data` (an image, or `mime`'s file) until
        the ttl has passed."""
        self._expire()
        token = secrets.token_urlsafe(32)
        mime = mime or image_mime(data) or "application/octet-stream"
        self._items[token] = _Item(data, mime, self.clock() + self.ttl)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._items) > 1:
            self._drop(next(iter(self._items)))
        return self.public_url + self.route.replace("{token}", token)

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    async def serve(self, request: web.Request) -> web.Response:
        """GET `route`: the file, or 404 for a token unknown or expired."""
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
