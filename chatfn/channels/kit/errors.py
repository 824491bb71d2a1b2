"""The five failures a channel raises: it classifies what its platform said, and the kit's
connect loop (channel.py) and the delivery policy (chatfn/runtime/delivery_policy.py) decide
what follows. They live in chatfn.common.messages (the outbox, below the channels, catches
them); a channel imports them from here.

- `CredentialsRefused(text)`: the platform refused the token or secret. The text is the one
  line the operator reads: name the setting to fix. Connecting: down, retried slowly;
  sending: the message waits in the outbox.
- `RateLimited(text, retry_after)`: slow down; `retry_after` seconds as the platform said (None
  when it named none: a backoff). Waited out in place within `max_retry_after`, else in the
  outbox.
- `Unreachable(text)`: network, timeout, 5xx. Connecting: backoff to a cap; sending: the
  message waits in the outbox (backoff, or at once when the channel is back).
- `NotDelivered(text, rest=)`: cannot go out now for another reason (not connected yet); the
  base of the three above. `rest` is what a split message still owes.
- `DeliveryRefused(text)`: refused for good (a chat that does not exist, no permission).

What a platform's own REST client raises for an error answer, before a sender classifies it,
is `ApiError` when the platform answers an HTTP status and a numeric code of its own: which
codes mean refused credentials or a rate limit is the platform's (`auth_codes`, `rate_codes`).
"""

from typing import ClassVar

from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    NotDelivered,
    RateLimited,
    Unreachable,
)

__all__ = [
    "ApiError",
    "CredentialsRefused",
    "DeliveryRefused",
    "NotDelivered",
    "RateLimited",
    "Unreachable",
]


class ApiError(Exception):
    """A call the platform answered with an error: the HTTP `status`, the platform's own
    `code` (0: none), its `message`, and the wait a rate limit named (`retry_after`, seconds;
    None: it named none). Its text is "HTTP <status>[, code <code>][: <message>]"."""

    #: The platform's codes of refused credentials and of a rate limit (HTTP 401 and 429 are
    #: those whatever the code).
    auth_codes: ClassVar[frozenset[int]] = frozenset()
    rate_codes: ClassVar[frozenset[int]] = frozenset()

    def __init__(
        self, status: int, code: int, message: str, retry_after: float | None = None
    ) -> None:
        what = f"HTTP {status}" + (f", code {code}" if code else "")
        super().__init__(f"{what}: {message}" if message else what)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after

    @property
    def is_auth(self) -> bool:
        return self.status == 401 or self.code in self.auth_codes

    @property
    def is_rate_limit(self) -> bool:
        """A limit: HTTP 429, a rate code, or a wait named."""
        return self.status == 429 or self.code in self.rate_codes or self.retry_after is not None
