"""A rate limit that is the account's, not one chat's: when the platform names a wait longer
than the delivery policy waits in place, nothing is sent to any chat before it has passed
(each send raises RateLimited for the time left, and the message waits in the outbox)."""

from __future__ import annotations

import time

from chatfn.common.messages import RateLimited

__all__ = ["AccountHold"]


class AccountHold:
    def __init__(self) -> None:
        self._until = 0.0  # monotonic time the platform asked to wait until

    def check(self, label: str) -> None:
        """RateLimited while a long wait is on."""
        left = self._until - time.monotonic()
        if left > 0:
            raise RateLimited(f"{label} asked to wait {left:.0f} s more before sending", left)

    def asked(self, wait: float, limit: float) -> None:
        """The platform asked to wait `wait` s; over `limit` (what the policy waits in
        place) it holds every chat."""
        if wait > limit:
            self._until = max(self._until, time.monotonic() + wait)
