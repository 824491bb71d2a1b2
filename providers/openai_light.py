"""A Chat Completions POST that skips the `openai` SDK's per-request set-up, on the SDK's own
HTTP client, for the common case.

Why: `client.post(...)` builds a pydantic `FinalRequestOptions`, copies it, runs the auth hooks,
merges and re-validates the headers and parses the URL twice, on every request. That costs
about 0.4 ms of CPU a request here (`python bench/bench_pipeline.py --profile chatfn`: the SDK's
`_build_request` and `request` around a send of half that), two in a tool turn: a fifth of all
the CPU chatfn spends on a message. For a client the adapter made itself, from a plain API
key and a base URL without a query, none of it changes from one request to the next. So the
URL and the headers are made once, from the SDK's public properties (`base_url`,
`auth_headers`, `default_headers`, `timeout`), and each request, streamed or not, goes out over the
SDK's own HTTP client (the one the adapter gave it).

What stays the SDK's:
- the HTTP client and its transport (aiohttp by default, `providers/sdk_http.py`);
- a streamed answer's decoding: `stream` hands the response to the SDK's `AsyncStream`, which
  reads the events and raises the SDK's errors mid-stream;
- every retry: a first attempt that fails in a way the SDK retries (a connection error, a
  timeout, 408/409/429/5xx, `x-should-retry`) waits what the SDK's first retry waits
  (`retry-after` up to two minutes, else about 0.5 s), then goes to `client.post` with one
  retry fewer, so a request is tried as many times as before;
- the errors: a refusal is the `openai.APIStatusError` subclass the SDK makes of that answer
  (`_make_status_error_from_response`), a connection error `APIConnectionError`, a timeout
  `APITimeoutError`;
- the answer as `client.post(..., cast_to=object)` returns it: the JSON when the content type
  says JSON, else the text.

The SDK methods used here that are not its public API (`_should_retry`,
`_parse_retry_after_header`, `_make_status_error_from_response`) are looked up when the poster
is made: an SDK without one of them gets no poster, and every request goes through
`client.post` as before. pyproject pins `openai<4` for that reason, and
tests/providers/test_openai_light.py sends each case through both ways and compares the
headers, the body bytes, the attempts and the errors.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai import AsyncOpenAI

#: The path both ways post to, relative to the client's base URL.
PATH = "/chat/completions"

# The SDK's first retry: `INITIAL_RETRY_DELAY` less up to 25% jitter, or the server's
# `retry-after` when it is at most `MAX_RETRY_AFTER_DELAY` (openai/_constants.py).
_FIRST_RETRY_DELAY = 0.5
_MAX_RETRY_AFTER = 120.0

_SDK_METHODS = ("_should_retry", "_parse_retry_after_header", "_make_status_error_from_response")


class LightPost:
    """`await poster(body)`: what `client.post(PATH, body=body, cast_to=object)` returns or
    raises, with the SDK's set-up made once. Made by `for_client`, which says when it can."""

    def __init__(self, client: AsyncOpenAI, http: Any, url: Any, headers: dict[str, str]) -> None:
        self.client, self.http, self.url, self.headers = client, http, url, headers
        # The httpx flavour the SDK's client is built on (httpx2 in openai 3.x): its
        # exception classes tell a timeout from a connection error.
        self.httpx = sys.modules[_async_client_base(type(http)).__module__.split(".")[0]]
        # What `http.build_request` merges in on every call, merged once: the HTTP client's
        # own headers under ours, and its timeout (which the transport reads from the request).
        self.merged = self.httpx.Headers(http.headers)
        self.merged.update(headers)
        self.extensions = {"timeout": http.timeout.as_dict()}

    @classmethod
    def for_client(cls, client: AsyncOpenAI, http: Any) -> LightPost | None:
        """A poster for `client`, whose HTTP client is `http` (the one the adapter made and
        passed as `http_client`); None when the request would not be the same: a base URL with
        a query or default query parameters, an auth the SDK computes per request (a key that
        is not a plain string, a custom `httpx.Auth`), an SDK without the methods named above."""
        if http is None or not all(hasattr(client, name) for name in _SDK_METHODS):
            return None
        if not isinstance(client.api_key, str) or client.default_query or client.custom_auth:
            return None
        base = client.base_url
        if b"?" in base.raw_path or not base.raw_path.endswith(b"/"):
            return None
        try:
            headers = _fixed_headers(client)
        except (AttributeError, TypeError, ValueError):
            return None
        url = base.copy_with(raw_path=base.raw_path + PATH.lstrip("/").encode())
        return cls(client, http, url, headers)

    async def __call__(self, body: dict[str, Any]) -> Any:
        """What `client.post(PATH, body=body, cast_to=object)` returns: the JSON answer, or
        its text when the content type is not JSON."""
        response = await self._send(body, None)
        if not isinstance(response, self.httpx.Response):
            return response  # the SDK's retry's answer
        content_type = response.headers.get("content-type", "*").split(";")[0]
        if not content_type.endswith("json"):
            return response.text
        return response.json()

    async def stream(self, body: dict[str, Any], stream_cls: type[Any]) -> Any:
        """What `client.post(PATH, body=body, cast_to=object, stream=True,
        stream_cls=stream_cls)` returns: the SDK's stream over the answer, which decodes the
        events and raises the SDK's errors mid-stream."""
        response = await self._send(body, stream_cls)
        if not isinstance(response, self.httpx.Response):
            return response
        return stream_cls(cast_to=object, response=response, client=self.client)

    async def _send(self, body: dict[str, Any], stream_cls: type[Any] | None) -> Any:
        """The first attempt's successful response (its body read unless streamed), or what
        the SDK's `post` made of the retries left."""
        content = _dumps(body)
        if self.http.cookies:  # a server set cookies: the HTTP client adds them to the request
            request = self.http.build_request(
                "POST", self.url, headers=self.headers, content=content
            )
        else:
            request = self.httpx.Request(
                "POST", self.url, headers=self.merged, content=content, extensions=self.extensions
            )
        retries = self.client.max_retries
        try:
            response = await self.http.send(request, stream=stream_cls is not None)
        except Exception as exc:  # noqa: BLE001 - as the SDK: any transport error is a connection error
            if retries > 0:
                return await self._retry(body, None, stream_cls)
            import openai

            if isinstance(exc, self.httpx.TimeoutException):
                raise openai.APITimeoutError(request=request) from exc
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            if retries > 0 and self.client._should_retry(response):
                await response.aclose()
                return await self._retry(body, response.headers, stream_cls)
            await response.aread()
            raise self.client._make_status_error_from_response(response) from None
        return response

    async def _retry(self, body: dict[str, Any], headers: Any, stream_cls: type[Any] | None) -> Any:
        """The first retry's wait, then the SDK's own `post` with the retries left."""
        wait = self.client._parse_retry_after_header(headers)
        if wait is None or not 0 < wait <= _MAX_RETRY_AFTER:
            wait = _FIRST_RETRY_DELAY * (1 - 0.25 * random.random())  # noqa: S311 - jitter
        await asyncio.sleep(wait)
        return await self.client.post(
            PATH,
            body=body,
            cast_to=object,
            stream=stream_cls is not None,
            stream_cls=stream_cls,
            options={"max_retries": self.client.max_retries - 1},
        )


def _async_client_base(cls: type) -> type:
    return next(c for c in cls.__mro__ if c.__name__ == "AsyncClient")


def _fixed_headers(client: AsyncOpenAI) -> dict[str, str]:
    """The headers the SDK sends on every attempt of a first try: its auth header, its default
    headers (user agent, platform, organisation and project when set, the caller's own), the
    retry count (0) and the read timeout; `Omit` values dropped, as the SDK drops them."""
    headers: dict[str, str] = {}
    for name, value in {**client.auth_headers, **client.default_headers}.items():
        if isinstance(value, str):
            headers[name] = value
    headers["x-stainless-retry-count"] = "0"
    timeout = client.timeout
    read = getattr(timeout, "read", timeout)
    if read is not None:
        headers["x-stainless-read-timeout"] = str(read)
    return headers


def _dumps(body: dict[str, Any]) -> bytes:
    """The body as the SDK encodes it (`openapi_dumps`, httpx's own JSON settings)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
