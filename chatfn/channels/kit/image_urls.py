"""An image a reply names by URL (a function's `FunctionResult.images`), downloaded by the bot
for a platform that takes only uploaded bytes: the same rules on every platform.

The URL may be a user's, so it goes through the bot's fetch helper (chatfn/common/fetch.py):
an internal address is refused unless `bot.fetch` allows it, the download is bounded in bytes
and time, and a page that is not an image is refused before it is read. What follows for the
message is the kit's errors: refused for good (DeliveryRefused: an address refused, not an
image, too large: it will not improve by waiting) or not now (NotDelivered: the network
failed; the outbox tries again).
"""

from __future__ import annotations

from chatfn.common.fetch import (
    FetchAllow,
    Fetched,
    FetchError,
    FetchRefused,
    FetchTooLarge,
    FetchWrongType,
    fetch,
)
from chatfn.common.messages import DeliveryRefused, NotDelivered

__all__ = ["fetch_image_url"]


async def fetch_image_url(
    url: str, *, max_bytes: int, allow: FetchAllow | None = None, timeout: float = 30.0
) -> Fetched:
    """The image at `url` (its `data` and `content_type`), at most `max_bytes` and `timeout`
    seconds in all; `allow`: the internal hosts and networks `bot.fetch` lets through."""
    try:
        return await fetch(
            url,
            allow=allow,
            max_bytes=max_bytes,
            timeout=timeout,
            accept=lambda kind: kind.startswith("image/"),
        )
    except (FetchRefused, FetchWrongType, FetchTooLarge) as exc:
        raise DeliveryRefused(f"image {url[:80]} not fetched: {exc.detail}") from None
    except FetchError as exc:
        raise NotDelivered(f"image {url[:80]} not fetched: {exc.detail}") from None
