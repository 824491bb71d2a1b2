"""A platform's REST client, the parts every one of them wrote the same: one aiohttp session
opened when first needed (and again after it closed) and closed once, the errors that mean
"the network, not the platform", the wait a rate-limited answer names, and what an HTTP error
status means for a send (`by_status`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import aiohttp

from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    RateLimited,
    Unreachable,
)

__all__ = ["NETWORK_ERRORS", "ApiSession", "by_status", "retry_after"]

#: The network failed, not the platform: the outbox tries again later.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError)


class ApiSession:
    """One aiohttp session for a platform's calls, each at most `timeout` seconds; a REST
    client subclasses it and calls `self.session()`."""

    timeout: ClassVar[float] = 20.0

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """The session, opened now if it is not open (first call, or closed since)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def retry_after(
    headers: Mapping[str, Any] | None, names: tuple[str, ...] = ("Retry-After",)
) -> float | None:
    """Seconds to wait, from the first of `names` (in any case, a list's first value: an
    SDK's headers) that holds a number (a negative one is 0); None when none does."""
    found = {str(k).lower(): v for k, v in (headers or {}).items()}
    for name in names:
        raw: Any = found.get(name.lower())
        raw = raw[0] if isinstance(raw, list) and raw else raw
        try:
            return max(0.0, float(raw))
        except (TypeError, ValueError):
            continue
    return None


def by_status(
    status: int,
    retry_after: float | None,
    *,
    rate: str,
    refused: str,
    failing: str,
    rejected: str,
) -> Exception:
    """A REST platform's error answer to a send as the kit's error, by its HTTP status: 429 a
    rate limit (waiting `retry_after`), 401 refused credentials, 5xx or no answer at all (0)
    the platform failing (tried again), anything else the message refused for good. The
    texts are the platform's own, for each case."""
    if status == 429:
        return RateLimited(rate, retry_after)
    if status == 401:
        return CredentialsRefused(refused)
    if status >= 500 or status == 0:
        return Unreachable(failing)
    return DeliveryRefused(rejected)
