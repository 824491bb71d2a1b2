"""Media of incoming `m.image` events, downloaded with the account's access token: the
authenticated media API (`/_matrix/client/v1/media/download/{server}/{mediaId}`, Matrix 1.11;
servers with `enable_authenticated_media` refuse the old path for new media), or the legacy
`/_matrix/media/v3/download/...` on a server without it (it answers the v1 path 404/405
`M_UNRECOGNIZED`). The bytes become a data URI: an mxc:// URI is of no use to a model, and
the token must not leave the channel."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
from nio import AsyncClient

from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.images import data_uri
from chatfn.common.fetch import FetchError, FetchStatus, read_limited

__all__ = ["download"]


async def download(
    client: AsyncClient, content: dict[str, Any], limit: int, kind: str = "image"
) -> str | None:
    """An m.image's (or, `kind` "audio", an m.audio's) media as a data URI: the
    authenticated media API, or the legacy one on a homeserver without it."""
    url = content.get("url")
    if not isinstance(url, str) or not url.startswith("mxc://"):
        return None  # an encrypted file (`file`), or no media
    parts = urlsplit(url)
    server, media = parts.netloc, parts.path.lstrip("/")
    if not server or not media or "/" in media:
        return None
    info = content.get("info")
    if not isinstance(info, dict):
        info = {}
    tail = f"/download/{quote(server, safe='')}/{quote(media, safe='')}"
    paths = (f"/_matrix/client/v1/media{tail}", f"/_matrix/media/v3{tail}")
    mime = str(info.get("mimetype") or "")

    async def fetch() -> bytes:
        nonlocal mime
        for path in paths:
            response = await client.send(
                "GET",
                path,
                headers={"Authorization": f"Bearer {client.access_token}"},
                timeout=30,
            )
            async with response:
                if response.status in (404, 405) and path == paths[0]:
                    body = await response.read()
                    if b"M_UNRECOGNIZED" in body or not body.strip().startswith(b"{"):
                        continue  # a homeserver without authenticated media
                if response.status != 200:
                    raise FetchStatus(url, response.status)
                mime = response.content_type or mime
                return await read_limited(response, limit)  # to its end (kit/images.py)
        return b""

    errors = (FetchError, aiohttp.ClientError, TimeoutError, OSError)
    size = int(info.get("size") or 0)
    data = await downloaded(f"Matrix {kind} {url}", errors, fetch, size=size, limit=limit)
    if not data:
        return None
    if kind == "audio" and not mime.startswith("audio/"):
        mime = "audio/ogg" if data.startswith(b"OggS") else mime  # served as octet-stream
    if not mime.startswith(f"{kind}/"):
        return None
    return data_uri(data, mime)
