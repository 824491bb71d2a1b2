"""One delivery policy: how a message that did not go out is tried again, on every platform.

A channel only classifies a failure (chatfn/common/messages.py): `RateLimited` with the wait
the platform named, `Unreachable`, `CredentialsRefused`, a plain `NotDelivered`, or
`DeliveryRefused` (never again). This one object decides what follows, so that "how chatfn
retries a send" has one answer:

- In place, inside the chat's order (`call`, used by a channel's sender around each platform
  call): a RateLimited within the platform's `max_retry_after` is waited out and the same
  call made again (the chat's later parts wait behind it); one that names no wait is tried
  again after a backoff (`first`, doubling, to `cap`). Past that it is raised: the message
  waits in the outbox.
- In the outbox (`retry_in`, applied by chatfn/runtime/outbox.py): a chat whose message waits
  is tried again once the platform's wait has passed (RateLimited), after a backoff by its
  failures in a row (Unreachable, CredentialsRefused: a platform that is down is not asked
  every second), or as soon as its channel says it can send (`kick`) or on the outbox's next
  pass (a plain NotDelivered).
- Expiry: a message still waiting after `max_wait` seconds is logged and counted as expired.
- A call that failed without saying why (an action answered with a failure code, a 5xx):
  tried again in place after `pause(n)`: `retries` times (then refused for good), or until
  `max_wait` for a sender that keeps trying (the HTTP API's webhook).

`max_retry_after` is one key (`storage.outbox.max_retry_after`) with per-platform overrides
(`channels.<name>.max_retry_after`). The shapes follow aiogram's `BackoffConfig` and
pydantic-ai's `RetryConfig`: one object decides when to try again, callers classify errors.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from loguru import logger

from chatfn.common.messages import CredentialsRefused, NotDelivered, RateLimited, Unreachable

__all__ = ["DeliveryPolicy"]

T = TypeVar("T")
DEFAULT_MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """How sends are tried again (module docstring)."""

    #: The longest wait a platform may ask for that is waited out in place (seconds).
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    #: Per platform: its own `max_retry_after`.
    overrides: Mapping[str, float] = field(default_factory=dict)
    #: The backoff of a failure that names no wait: `first` seconds, doubling to `cap`.
    first: float = 1.0
    cap: float = 60.0
    jitter: float = 0.1
    #: Seconds a message may wait in the outbox before it is counted as expired.
    max_wait: float = 86400.0
    #: A call the platform failed without saying when to try again (a failure code, a 5xx)
    #: is tried again in place after `retry_pause` seconds, doubling to `cap`: `retries`
    #: times (then refused for good), or until `max_wait` (the HTTP API's webhook).
    retry_pause: float = 0.5
    retries: int = 1

    @classmethod
    def from_settings(cls, core: Any) -> DeliveryPolicy:
        """The policy of a configuration: `storage.outbox` and each channel section's
        `max_retry_after` (an override where it is set)."""
        outbox = core.storage.outbox
        overrides: dict[str, float] = {}
        channels = getattr(core, "channels", None)
        for name in type(channels).model_fields if channels is not None else ():
            own = getattr(getattr(channels, name, None), "max_retry_after", None)
            if isinstance(own, int | float):
                overrides[name] = float(own)
        return cls(
            max_retry_after=getattr(outbox, "max_retry_after", DEFAULT_MAX_RETRY_AFTER),
            overrides=overrides,
            max_wait=outbox.max_wait,
        )

    def override(self, platform: str, seconds: float | None) -> DeliveryPolicy:
        """This policy with `platform`'s own `max_retry_after` (None: unchanged)."""
        if seconds is None or self.overrides.get(platform) == seconds:
            return self
        return replace(self, overrides={**self.overrides, platform: float(seconds)})

    def limit(self, platform: str) -> float:
        """The longest platform-asked wait waited out in place for `platform`."""
        return self.overrides.get(platform, self.max_retry_after)

    def delay(self, failures: int) -> float:
        """The backoff after `failures` failures in a row (0: the first)."""
        base = min(self.cap, self.first * (2 ** min(failures, 30)))
        return base * (1 + random.uniform(-self.jitter, self.jitter))

    def pause(self, attempt: int) -> float:
        """The in-place pause before try `attempt` + 2 of a call that failed (0: the first)."""
        return min(self.cap, self.retry_pause * (2 ** min(attempt, 30)))

    def retry_in(self, failure: NotDelivered, failures: int) -> float | None:
        """Seconds before the outbox tries a chat again after `failure`, its `failures`-th
        in a row (0: the first); None: when its channel kicks, or on the next pass."""
        if isinstance(failure, RateLimited):
            if failure.retry_after is not None:
                return failure.retry_after
            return self.delay(failures)
        if isinstance(failure, Unreachable | CredentialsRefused):
            return self.delay(failures)
        return None

    def expired(self, waited: float) -> bool:
        return waited > self.max_wait

    async def call(
        self,
        platform: str,
        key: Hashable,
        call: Callable[[], Awaitable[T]],
        *,
        pace: Callable[[Hashable], Awaitable[None]] | None = None,
        label: str = "",
    ) -> T:
        """One platform call for the chat `key`, paced by `pace` (the chat's rate limit); a
        RateLimited within the platform's limit waited out and the call made again, a longer
        one raised with the wait it needs (the message waits in the outbox)."""
        waited, tries = 0.0, 0
        while True:
            if pace is not None:
                await pace(key)
            try:
                return await call()
            except RateLimited as slow:
                wait = slow.retry_after if slow.retry_after is not None else self.delay(tries)
                tries += 1
                if waited + wait > self.limit(platform):
                    if slow.retry_after is None:  # the outbox waits as long as we would have
                        raise RateLimited(str(slow), wait, slow.rest) from None
                    raise
                logger.warning(
                    "{} rate limit on {}: retrying in {:.1f} s", label or platform, key, wait
                )
                await asyncio.sleep(wait)
                waited += wait
