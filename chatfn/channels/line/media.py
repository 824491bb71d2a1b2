"""Pictures offered to LINE by URL: the bot serves them itself, under an unguessable path
that expires (`channels.line.public_url`), as the QQ channel does (chatfn/channels/qq/media.py).

LINE's image message names an `originalContentUrl` and a `previewImageUrl`, https URLs LINE's
servers download (https://developers.line.biz/en/reference/messaging-api/#image-message);
there is no upload. A picture the model made has no URL, so with `public_url` set it is put on
this shelf and LINE is given `{public_url}/line/media/<token>`: 32 random bytes of token,
served for `media_ttl` seconds, at most `MAX_BYTES` held (the oldest go first).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

from aiohttp import web

from chatfn.channels import kit

__all__ = ["MAX_BYTES", "MEDIA_ROUTE", "MediaShelf"]

MEDIA_ROUTE = "/line/media/{token}"
MAX_BYTES = 64 * 1024 * 1024


class MediaShelf:
    """The pictures LINE may fetch now, by token."""

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
        self._items: OrderedDict[str, tuple[bytes, str, float]] = OrderedDict()
        self._bytes = 0

    def put(self, data: bytes, mime: str | None = None) -> str:
        """The URL at which LINE can fetch `data` (an image, or `mime`'s audio) until the ttl
        has passed."""
        self._expire()
        token = secrets.token_urlsafe(32)
        mime = mime or kit.image_mime(data) or "application/octet-stream"
        self._items[token] = (data, mime, self.clock() + self.ttl)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._items) > 1:
            self._drop(next(iter(self._items)))
        return f"{self.public_url}/line/media/{token}"

    def __len__(self) -> int:
        self._expire()
        return len(self._items)

    async def serve(self, request: web.Request) -> web.Response:
        """GET /line/media/{token}: the picture, or 404 for a token unknown or expired."""
        self._expire()
        item = self._items.get(request.match_info.get("token", ""))
        if item is None:
            raise web.HTTPNotFound()
        return web.Response(
            body=item[0],
            content_type=item[1],
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    def _expire(self) -> None:
        now = self.clock()
        for token in [t for t, item in self._items.items() if item[2] <= now]:
            self._drop(token)

    def _drop(self, token: str) -> None:
        item = self._items.pop(token, None)
        if item is not None:
            self._bytes -= len(item[0])
