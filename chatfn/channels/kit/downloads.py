"""A file a user sent (an image, a voice), downloaded by its channel, the same on every
platform: one the platform says is larger than the bot takes is not asked for, and one whose
download fails is one warning and nothing more (the message's text is still answered). What
came is turned into the data URI the bot takes by media.py (`image_uri`, `voice_uri`), which
looks at its bytes, not at what the platform called it. How a file is downloaded (the bot's
token in a header, a file id asked for its URL first) and what its errors are is the
platform's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

__all__ = ["downloaded"]


async def downloaded(
    what: str,
    errors: tuple[type[BaseException], ...],
    download: Callable[..., Awaitable[bytes]],
    *args: Any,
    size: int | None = None,
    limit: int | None = None,
    log: Any = logger,
) -> bytes | None:
    """The bytes `download(*args)` gives, or None: when the platform said the file is `size`
    bytes, over `limit` (it is then not downloaded), or when the download failed with one of
    `errors`. Either is a warning naming `what` ("a voice AgADxx") on `log` (the
    channel's logger)."""
    if size is not None and limit is not None and size > limit:
        log.warning("{} is over {} bytes: not downloaded", what, limit)
        return None
    try:
        return await download(*args)
    except errors as exc:
        log.warning("{} not downloaded: {}", what, exc)
        return None
