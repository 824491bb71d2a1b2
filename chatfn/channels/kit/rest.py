"""A platform's REST client, the parts every one of them wrote the same: one aiohttp session
opened when first needed (and again after it closed) and closed once, the errors that mean
"the network, not the platform", the wait a rate-limited answer names, and what an HTTP error
status means for a send (`by_status`, and `SendErrors` with the sentences every such platform
wrote the same), and the error a client raises for an error answer (`HttpError`; a platform
that answers its own error code and message whatever the status, `CodedError`: both of the
family of errors.py, and named here too), or for the platform's passing trouble
(`Unavailable`: tried again later, as the network's). A client on its channel's own session
whose calls each read a JSON answer the platform checks is a `ChannelApi`."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp

from chatfn.channels.kit.errors import CodedError, HttpError, PlatformError
from chatfn.common.fetch import FetchTooLarge, read_limited
from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    RateLimited,
    Unreachable,
)

__all__ = [
    "NETWORK_ERRORS",
    "PASSING_ERRORS",
    "ApiSession",
    "BearerApi",
    "ChannelApi",
    "CodedError",
    "HttpError",
    "SendErrors",
    "Unavailable",
    "by_status",
    "read_file",
    "retry_after",
]

#: The network failed, not the platform: the outbox tries again later.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError)


class Unavailable(Exception):
    """The platform answered 5xx, said it is busy, or answered what is not its answer: try
    again later."""


#: The network's errors and the platform's passing trouble: the message waits in the outbox.
PASSING_ERRORS: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, Unavailable)


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


class BearerApi(ApiSession):
    """A REST client of one channel's settings (`cfg`) whose calls carry the secret setting
    `token_key` as `Authorization: Bearer` (read at each call: a changed token counts)."""

    token_key: ClassVar[str] = "token"

    def __init__(self, settings: Any) -> None:
        super().__init__()
        self.cfg = settings

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.cfg.secret_text(self.token_key)}"}

    async def json_call(self, method: str, url: str, **kw: Any) -> Any:
        """One call's JSON answer (None: an empty one); an error status raises `refused`, an
        answer that is not JSON `garbled`."""
        async with self.session().request(method, url, headers=self.auth, **kw) as r:
            body = await r.read()
            if not 200 <= r.status < 300:
                raise self.refused(r.status, body, r.headers)
        try:
            return json.loads(body) if body else None
        except ValueError:
            raise self.garbled(r.status, "an answer that is not JSON") from None

    def refused(self, status: int, body: bytes, headers: Any) -> Exception:
        """The platform's error for an error answer."""
        return HttpError.answered(status, body, retry_after(headers))

    def garbled(self, status: int, message: str) -> Exception:
        """The platform's error for an answer it should not have given."""
        return HttpError(status, "", message)


class ChannelApi(ABC):
    """A platform's REST client on its channel's aiohttp `session` (settings `cfg`): `call` is
    one request to `root` + its path with the platform's `headers`, its JSON answer (None: an
    empty one, or not JSON) handed to the platform's `answered`, which raises its error or
    gives what the call returns."""

    def __init__(self, settings: Any, session: aiohttp.ClientSession) -> None:
        self.cfg = settings
        self.session = session

    @property
    @abstractmethod
    def root(self) -> str:
        """The API's address, which each call's path follows."""

    @property
    def headers(self) -> dict[str, str]:
        """Every call's headers (its credentials); none by default."""
        return {}

    @abstractmethod
    def answered(self, path: str, response: aiohttp.ClientResponse, body: Any) -> Any:
        """What the call to `path` returns, from its `body` (the platform's error raised)."""

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """One call (class docstring), at most `timeout` seconds; `form` a multipart body."""
        kw = {"params": params, "json": json, "data": form}
        return await self.request(
            method, path, kw | {"timeout": aiohttp.ClientTimeout(total=timeout)}
        )

    async def request(self, method: str, path: str, kw: dict[str, Any]) -> Any:
        """The call with `headers` (a platform overrides it to look before, or to try again)."""
        return await self.send(method, path, kw, self.headers)

    async def send(self, method: str, path: str, kw: dict[str, Any], headers: Any) -> Any:
        async with self.session.request(method, self.root + path, headers=headers, **kw) as r:
            try:
                body = await r.json(content_type=None)
            except ValueError:
                body = None
            return self.answered(path, r, body)


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


@dataclass(frozen=True, slots=True)
class SendErrors:
    """A REST platform's failed send as the kit's error: its client's `error` (a member of the
    kit's error family, errors.py: its HTTP `status` and the `retry_after` it named) by
    `by_status`, the network's as unreachable. `name` is the platform as the sentences name
    it ("the X server"), `credentials` the settings a 401 refused ("channels.x.token")."""

    error: type[PlatformError[Any]]
    name: str
    credentials: str

    @property
    def every(self) -> tuple[type[BaseException], ...]:
        """The client's error and the network's (`except errors.every`)."""
        return (self.error, *NETWORK_ERRORS)

    def for_connect(
        self, exc: BaseException, where: str, fix: str = "", refused: tuple[int, ...] = (401, 403)
    ) -> BaseException:
        """`exc` raised logging in at `where` as the kit's error: an error status in `refused`
        the credentials refused (the sentence ends with `fix`, what the operator does), any
        other the platform failing, the network unreachable (both tried again by the kit's
        connect loop); anything else as it is."""
        if isinstance(exc, self.error):
            if exc.status in refused:
                said = f"{self.name} refused {self.credentials} ({exc})"
                return CredentialsRefused(f"{said}: {fix}" if fix else said)
            return Unreachable(f"{self.name} answered {exc} at {where}")
        if isinstance(exc, NETWORK_ERRORS):
            return Unreachable(f"{self.name} not reachable at {where} ({exc!r})")
        return exc

    def for_send(self, exc: BaseException, key: str, where: str = "") -> Exception | None:
        """`exc` raised sending to the chat `key` (None: not the platform's nor the network's:
        raised as it is); `where` is the address a network failure names."""
        if isinstance(exc, self.error):
            return by_status(
                exc.status,
                exc.retry_after,
                rate=f"{self.name} rate limit sending to {key}",
                refused=f"{self.name} refused {self.credentials} ({exc})",
                failing=f"{self.name} answered {exc} sending to {key}",
                rejected=f"{self.name} refused the message to {key}: {exc}",
            )
        if isinstance(exc, NETWORK_ERRORS):
            at = f" at {where}" if where else ""
            return Unreachable(f"{self.name} not reachable{at} ({exc!r})")
        return None


async def read_file(
    r: aiohttp.ClientResponse, max_bytes: int, error: Callable[[int, bytes, Any], Exception]
) -> bytes:
    """A file's body from the answer `r`, at most `max_bytes`: an error status is raised as
    `error(status, body, headers)`, a larger body as `error(0, ...)` saying so."""
    if r.status != 200:
        raise error(r.status, await r.read(), r.headers)
    try:
        return await read_limited(r, max_bytes)
    except FetchTooLarge:
        raise error(0, f"file larger than {max_bytes} bytes".encode(), {}) from None
