"""A platform client's exceptions as the kit's errors (errors.py), for a platform whose client
raises three kinds: its credentials refused, its other refusals, and the network failing. The
sentences are the same on every such platform, naming it and the settings to fix; which
exception classes are which kind is the platform's (`ErrorKinds`). A refusal of the kit's
error family (`PlatformError`, errors.py: `ApiError`, `HttpError`, `CodedError`) says more of
itself: a rate limit (waited out), refused credentials, or the platform failing (5xx: tried
again)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from chatfn.channels.kit.errors import PlatformError
from chatfn.common.messages import CredentialsRefused, DeliveryRefused, RateLimited, Unreachable

__all__ = ["ErrorKinds"]

Kinds = tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True)
class ErrorKinds:
    """`label` (the platform's name in the sentences), `credentials` (the settings a refusal
    names: "channels.x.app_id / app_secret") and the exception classes of each kind; a class
    is taken as the first kind it is one of, in this order: the credentials refused, the
    network (an SDK whose network error is one of its errors), the platform's refusals."""

    label: str
    credentials: str
    refused: Kinds
    platform: Kinds
    network: Kinds

    @property
    def every(self) -> Kinds:
        """The classes of all three kinds (`except kinds.every`)."""
        return (*self.refused, *self.network, *self.platform)

    def for_send(self, exc: BaseException, key: str) -> Exception | None:
        """`exc` raised sending to the chat `key` as the kit's error (None: not one of these:
        raised as it is). The platform's other refusals refuse the message for good (a
        `PlatformError` that is not a limit, refused credentials or 5xx)."""
        if isinstance(exc, PlatformError) and exc.is_rate_limit:
            wait = exc.retry_after
            return RateLimited(f"{self.label} rate limit sending to {key} ({exc})", wait)
        if isinstance(exc, self.refused) or isinstance(exc, PlatformError) and exc.is_auth:
            return CredentialsRefused(f"{self.label} refused {self.credentials} ({exc})")
        if isinstance(exc, PlatformError) and exc.status >= 500:
            return Unreachable(f"{self.label} answered {exc} sending to {key}")
        if isinstance(exc, self.network):
            return Unreachable(f"{self.label} not reachable ({exc})")
        if isinstance(exc, self.platform):
            return DeliveryRefused(f"{self.label} refused the message to {key}: {exc}")
        return None

    @contextlib.contextmanager
    def connecting(self, call: str, where: str, fix: str = "") -> Iterator[None]:
        """Around the call `call` that logs in at `where`: its failure of these kinds raised
        as `for_connect` says (the kit's connect loop takes it)."""
        try:
            yield
        except self.every as exc:
            raise self.for_connect(exc, call, where, fix) from None

    def for_connect(self, exc: BaseException, call: str, where: str, fix: str = "") -> Exception:
        """`exc` raised by the call `call` that logs in at `where` as the kit's error: refused
        credentials (their sentence ends with `fix`, what the operator checks, when given),
        else unreachable (the kit's connect loop tries again; a probe says it as it is)."""
        if isinstance(exc, self.refused):
            said = f"{self.label} refused {self.credentials} ({exc})"
            return CredentialsRefused(f"{said}: {fix}" if fix else said)
        if isinstance(exc, self.platform) and not isinstance(exc, self.network):
            return Unreachable(f"{self.label} {call} failed ({exc})")
        return Unreachable(f"{self.label} not reachable at {where} ({exc})")
