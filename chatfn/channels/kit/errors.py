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

What a platform's own client raises for an error answer, before a sender classifies it, is
one of one family, `PlatformError`: the HTTP `status`, the platform's own `code`, its
`message` and the wait a rate limit named (`retry_after`), and from those whether the
credentials were refused (`is_auth`) or a rate limit hit (`is_rate_limit`); which codes mean
either is the platform's (`auth_codes`, `rate_codes`). Its members differ only in their text
and the code's type:

- `ApiError`: a numeric code, "HTTP 401, code 5: message" (the code left out when 0);
- `HttpError`: a code that is a word, "HTTP 401 code: message" (`answered`: from a JSON
  body `{code, "message"}`); its status 0: the call did not get that far;
- `CodedError`: a numeric code the platform answers whatever the status (mostly 200),
  "5: message" (only the message when 0), the message also as `msg`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Generic, Self, TypeVar

from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    NotDelivered,
    RateLimited,
    Unreachable,
)

__all__ = [
    "ApiError",
    "CodedError",
    "CredentialsRefused",
    "DeliveryRefused",
    "HttpError",
    "NotDelivered",
    "PlatformError",
    "RateLimited",
    "Unreachable",
]


#: The type of a platform's own error code: a number, or a word.
C = TypeVar("C", int, str)


class PlatformError(Exception, Generic[C]):
    """A call the platform answered with an error: the HTTP `status`, the platform's own
    `code` (0 or "": none), its `message`, and the wait a rate limit named (`retry_after`,
    seconds; None: it named none). Its text is `describe()`'s, each member's own."""

    #: The platform's codes of refused credentials and of a rate limit (HTTP 401 and 429 are
    #: those whatever the code).
    auth_codes: ClassVar[frozenset[int | str]] = frozenset()
    rate_codes: ClassVar[frozenset[int | str]] = frozenset()

    status: int
    code: C
    message: str
    retry_after: float | None

    def __init__(
        self, status: int, code: C, message: str, retry_after: float | None = None
    ) -> None:
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after
        super().__init__(self.describe())

    def describe(self) -> str:
        """The error's text: "HTTP <status>[, code <code>][: <message>]"."""
        what = f"HTTP {self.status}" + (f", code {self.code}" if self.code else "")
        return f"{what}: {self.message}" if self.message else what

    @property
    def is_auth(self) -> bool:
        return self.status == 401 or self.code in self.auth_codes

    @property
    def is_rate_limit(self) -> bool:
        """A limit: HTTP 429, a rate code, or a wait named."""
        return self.status == 429 or self.code in self.rate_codes or self.retry_after is not None


class ApiError(PlatformError[int]):
    """An error answer with an HTTP status and a numeric code of the platform's own (0:
    none): "HTTP <status>[, code <code>][: <message>]"."""


class HttpError(PlatformError[str]):
    """The platform answered a call with an error `status` (0: none, the call did not get that
    far), its own error `code` when it names one, its `message`, and the wait it asked for:
    "HTTP <status>[ <code>]: <message>"."""

    def describe(self) -> str:
        return f"HTTP {' '.join(filter(None, (str(self.status), self.code)))}: {self.message}"

    @classmethod
    def answered(
        cls, status: int, body: bytes, wait: float | None, *, under: str = "", code: str = "code"
    ) -> Self:
        """The error of an answer whose JSON body is `{code, "message"}` (inside the key
        `under`, when given); a body that is not is the message, its first 120 characters."""
        try:
            data: Any = json.loads(body)
        except ValueError:
            data = None
        if under and isinstance(data, dict):
            data = data.get(under)
        if not isinstance(data, dict):
            return cls(status, "", body[:120].decode(errors="replace"), wait)
        return cls(status, str(data.get(code) or ""), str(data.get("message") or ""), wait)


class CodedError(PlatformError[int]):
    """The platform refused a call with its own error `code` (0: none) and `msg` ("code: msg"),
    in an answer of HTTP `status`."""

    def __init__(
        self, code: int, msg: str, status: int = 200, retry_after: float | None = None
    ) -> None:
        super().__init__(status, code, msg, retry_after)

    @property
    def msg(self) -> str:
        return self.message

    def describe(self) -> str:
        return f"{self.code}: {self.message}" if self.code else self.message
