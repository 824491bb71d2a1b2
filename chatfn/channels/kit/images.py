"""Images on the way in and out, the same on every platform.

Out: `OutgoingMessage.images` holds `data:image/...;base64,` URIs and http(s) URLs (a
function's `FunctionResult.images`). `decode_image` turns one into the bytes to upload or the
URL to hand the platform, and refuses anything else for good (DeliveryRefused: a malformed
reference will not improve by waiting). `images_out` does that for a reply on a platform that
shows only the images it is given as uploads: the URLs go into the text as links.

In: a platform's image becomes a data URI (`data_uri`): its download URL usually carries the
bot's token, so the URL is never stored or shown. `fetch_image` downloads one within a size
limit and refuses an HTML page (a login page where the token lacks a scope).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING

from loguru import logger

from chatfn.common.messages import DeliveryRefused

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "MAX_IMAGE_IN",
    "data_uri",
    "decode_image",
    "fetch_image",
    "image_mime",
    "image_name",
    "images_out",
]

#: The largest image handed to a model (function_calls.images takes at most this).
MAX_IMAGE_IN = 5 * 1024 * 1024
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))


def decode_image(ref: str, max_bytes: int | None = None, platform: str = "") -> bytes | str:
    """A data URI as its bytes (at most `max_bytes`, the platform's limit); an http(s) URL as
    it is (the platform fetches it, or the caller does)."""
    if ref.startswith("data:"):
        head, _, body = ref.partition(",")
        if ";base64" not in head:
            raise DeliveryRefused(f"image {head[:40]!r} is not base64")
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise DeliveryRefused("image data URI is not valid base64") from None
        if max_bytes is not None and len(data) > max_bytes:
            where = f"{platform}'s " if platform else ""
            raise DeliveryRefused(f"image of {len(data)} bytes is over {where}{max_bytes} bytes")
        return data
    if ref.startswith(("http://", "https://")):
        return ref
    raise DeliveryRefused(f"image reference {ref[:40]!r} is neither a data URI nor a URL")


def images_out(
    refs: list[str], text: str, max_bytes: int | None, platform: str, link: str = "{}"
) -> tuple[str, list[bytes]]:
    """A reply's images `refs` decoded (`decode_image`): (`text` with each URL among them
    after it as `link` formats it, a paragraph each; the bytes of the others, to upload)."""
    images = [decode_image(i, max_bytes, platform) for i in refs]
    links = [link.format(i) for i in images if isinstance(i, str)]
    if links:
        text = "\n\n".join([text, *links]).strip()
    return text, [i for i in images if isinstance(i, bytes)]


def image_mime(data: bytes) -> str | None:
    """The image type its first bytes say (PNG, JPEG, GIF, WebP), or None."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    return "image/webp" if data[8:12] == b"WEBP" else None


def image_name(data: bytes) -> str:
    """A file name for an upload, by its type (JPEG when it cannot tell)."""
    mime = image_mime(data) or "image/jpeg"
    return "image." + {"image/jpeg": "jpg"}.get(mime, mime.split("/")[1])


def data_uri(data: bytes, mime: str | None = None) -> str:
    """`data` as a data URI (its type from `mime`, else its first bytes, else JPEG)."""
    kind = mime or image_mime(data) or "image/jpeg"
    return f"data:{kind};base64," + base64.b64encode(data).decode()


async def fetch_image(
    session: aiohttp.ClientSession,
    url: str,
    *,
    mime: str | None = None,
    headers: Mapping[str, str] | None = None,
    max_bytes: int = MAX_IMAGE_IN,
    what: str = "image",
) -> str | None:
    """An image a user sent, downloaded (with `headers`: the bot's token where the platform
    wants it) as a data URI; None, with a warning naming `what`, when it cannot be had, is
    over `max_bytes` or is an HTML page."""
    import aiohttp

    from chatfn.common.fetch import FetchTooLarge, read_limited

    try:
        async with session.get(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=30)
        ) as response:
            response.raise_for_status()
            # To its end: `content.read(n)` returns only what has arrived so far, and an
            # image sent in several writes would reach the model cut short.
            data = await read_limited(response, max_bytes)
    except FetchTooLarge:
        logger.warning("{} not downloaded: over {} bytes", what, max_bytes)
        return None
    except (aiohttp.ClientError, TimeoutError) as exc:
        logger.warning("{} not downloaded: {}", what, exc)
        return None
    if data.lstrip().startswith(b"<"):
        return None
    return data_uri(data, mime)
