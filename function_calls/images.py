"""Fetching the images users send, for models that can see them.

Bounded on every side, because the URL comes from a chat: downloaded through the one fetch
helper (chatfn/common/fetch.py: internal addresses refused, one deadline of `TIMEOUT` seconds
over the whole download, at most `MAX_BYTES`, asynchronous, so no thread is held), a
Content-Type of image/*, and bytes that really are PNG, JPEG, GIF or WebP. An inline image
(a data URI) is decoded on the bot's own pool for user work (chatfn/common/blocking.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import TYPE_CHECKING

from loguru import logger

from chatfn.common.blocking import run_blocking
from chatfn.common.fetch import (
    FetchAllow,
    FetchError,
    FetchTooLarge,
    FetchWrongType,
    fetch,
)
from function_calls.model_calls import ask
from providers.base import ChatModel
from providers.errors import ProviderError
from providers.types import ImagePart, Message

if TYPE_CHECKING:
    from function_calls.context import MessageContext

MAX_BYTES = 5 * 1024 * 1024
TIMEOUT = 10.0
MAX_IMAGES = 4
# Characters of one description put into the chat model's turn.
MAX_DESCRIPTION = 1000
DESCRIBE_PROMPT = (
    "You describe images for a chat assistant that cannot see them. In a few sentences, say "
    "what the image shows: the main subjects, any visible text (quoted exactly), and anything "
    "a person asking about it would want to know. Describe only; do not answer questions."
)
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class ImageError(Exception):
    """An image that cannot be used; `key` is the catalogue text for the user."""

    def __init__(self, key: str, detail: str = "") -> None:
        super().__init__(f"{key}: {detail}")
        self.key = key


def sniff(data: bytes) -> str | None:
    """The image type the bytes really are (None: not an image we accept)."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _checked(data: bytes) -> ImagePart:
    if len(data) > MAX_BYTES:
        raise ImageError("image.too_big", f"{len(data)} bytes")
    mime = sniff(data)
    if mime is None:
        raise ImageError("image.not_image", "unknown bytes")
    return ImagePart(mime, data)


def _decode_data_uri(ref: str) -> ImagePart:
    head, _, body = ref.partition(",")
    if ";base64" not in head or not head[5:].startswith("image/"):
        raise ImageError("image.not_image", head[:40])
    if len(body) > MAX_BYTES * 4 // 3 + 4:
        raise ImageError("image.too_big", f"{len(body)} base64 characters")
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("image.not_image", "bad base64") from None
    return _checked(data)


def _image_type(kind: str) -> bool:
    """A Content-Type an image may come with (none at all, or a generic one, is let through:
    the bytes are sniffed anyway)."""
    return not kind or kind.startswith("image/") or kind == "application/octet-stream"


async def fetch_image(
    ref: str,
    *,
    allow: FetchAllow | None = None,
    max_bytes: int = MAX_BYTES,
    timeout: float | None = None,
) -> ImagePart:
    """The image behind a reference (a URL or a data URI), checked; raises ImageError.
    `allow`: the internal hosts and networks this deployment lets through (`bot.fetch`);
    `timeout`: seconds for the whole download (None: `TIMEOUT`).

    Every failure to download, a refused internal address included, is the same
    `image.failed`: the reply must not tell an open internal port from a closed one."""
    if ref.startswith("data:"):
        return await run_blocking(_decode_data_uri, ref)
    try:
        got = await fetch(
            ref,
            allow=allow,
            max_bytes=max_bytes,
            timeout=TIMEOUT if timeout is None else timeout,
            accept=_image_type,
        )
    except FetchTooLarge as exc:
        raise ImageError("image.too_big", exc.detail) from None
    except FetchWrongType as exc:
        raise ImageError("image.not_image", exc.content_type) from None
    except FetchError as exc:
        raise ImageError("image.failed", f"{type(exc).__name__}: {exc}") from None
    return _checked(got.data)


async def fetch_images(refs: list[str], *, allow: FetchAllow | None = None) -> list[ImagePart]:
    """The first `MAX_IMAGES` images, fetched concurrently (each within its own `TIMEOUT`).
    The first that fails stops the others at once: the turn answers with that one's error,
    and nothing keeps downloading for it."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(fetch_image(r, allow=allow)) for r in refs[:MAX_IMAGES]]
    except ExceptionGroup as failed:
        first = failed.exceptions[0]
        if isinstance(first, ImageError):
            raise first from None
        raise
    return [t.result() for t in tasks]


async def describe_images(
    ctx: MessageContext, model: ChatModel, images: list[ImagePart]
) -> list[str | None]:
    """What `model` (a `vision: true` model, `bot.vision_model`) sees in each image, for a chat
    model without vision: Bubbles' approach, so a text-only model can still talk about a
    picture. None for an image the model could not describe (the chat model then gets the
    short "[image]" note); a failing describer never costs the user their answer."""

    async def one(image: ImagePart) -> str | None:
        messages = [
            Message(role="system", content=DESCRIBE_PROMPT),
            Message(role="user", content="Describe this image.", images=[image]),
        ]
        try:
            # On record like every request of the turn (usage row, metrics, limits' counts).
            response = await ask(ctx, model, messages, None, stream=False)
        except ProviderError as exc:
            logger.warning("vision model {} could not describe an image: {}", model.name, exc)
            return None
        text = " ".join((response.content or "").split())
        return text[:MAX_DESCRIPTION] or None

    return list(await asyncio.gather(*(one(i) for i in images)))
