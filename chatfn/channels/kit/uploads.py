"""An image a reply carries, as the bytes a platform's upload takes: a data URI decoded, a URL
downloaded by the bot (kit/image_urls.py: bounded, internal addresses refused unless allowed),
with its type and a file name; and what it says of its size, for platforms that show a
picture's dimensions before it loads."""

from __future__ import annotations

from dataclasses import dataclass

from chatfn.channels.kit.image_urls import fetch_image_url
from chatfn.channels.kit.images import decode_image
from chatfn.common.fetch import FetchAllow
from chatfn.common.messages import DeliveryRefused

__all__ = ["Upload", "image_upload"]


@dataclass(frozen=True, slots=True)
class Upload:
    data: bytes
    mime: str
    name: str

    def size(self) -> tuple[int, int] | None:
        """(width, height) of a PNG, from its header; None for anything else."""
        data = self.data
        if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
            return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return None


async def image_upload(ref: str, max_bytes: int, allow: FetchAllow | None = None) -> Upload:
    """The image `ref` (a data URI or an http(s) URL) as bytes to upload, at most `max_bytes`
    (DeliveryRefused over it); `allow`: what `bot.fetch` lets a URL be on."""
    found = decode_image(ref)
    if isinstance(found, bytes):
        data, mime = found, ref[5:].split(";")[0].split(",")[0] or "image/png"
    else:
        got = await fetch_image_url(found, max_bytes=max_bytes, allow=allow)
        data, mime = got.data, got.content_type
    if len(data) > max_bytes:
        raise DeliveryRefused(f"image of {len(data)} bytes is over {max_bytes}")
    extension = mime.split("/")[-1].split("+")[0] or "png"
    return Upload(data, mime, f"image.{extension}")
