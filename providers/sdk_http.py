"""The HTTP client under the `openai` and `anthropic` SDKs: their own aiohttp transport where
the SDK has one.

The SDKs' default stack (httpx over httpcore, anyio and h11) spends about 0.2-0.3 ms of CPU
per request more than the same request over aiohttp, which the bot already runs for its
channels: with it, chatfn's CPU per message fell from 1.04-1.11x the raw openai SDK loop's to
0.93-0.95x, and 200 turns in flight went from 132 to 243 msg/s (bench/README, "Follow-up
... the SDK's own aiohttp transport"). Each SDK ships that transport itself
(`DefaultAioHttpClient`, their `aiohttp` extra, vendored in current releases of both), so
only the SDK's own code talks HTTP (providers/openai_light.py sends through this same client).

One thing is corrected on the way: the openai SDK's copy of the transport reports every
`aiohttp.ClientConnectionError` as `ConnectTimeout`, so a refused connection or a server that
hung up would reach the bot as a timeout (ProviderTimeout) instead of an unreachable server
(ProviderUnavailable), and the user's message would say "took too long" about a server that
is down. Errors that are not timeouts get httpx's own classes back (`ConnectError`,
`RemoteProtocolError`, `ReadError`); the anthropic SDK's copy already does so.

`models.<name>.http_transport: httpx` keeps the SDK's default stack (a proxy setup that only
httpx handles, say); so does an SDK without the aiohttp transport. Gemini's SDK (google-genai)
has its own aiohttp path and is not concerned.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from typing import Any, Literal

import aiohttp
from loguru import logger


def aiohttp_client(sdk: Literal["openai", "anthropic"], timeout: Any) -> Any | None:
    """An `httpx.AsyncClient` (the SDK's flavour of httpx) sending through aiohttp, or None
    where this SDK has no aiohttp transport (then the SDK makes its default client)."""
    try:
        module = importlib.import_module(sdk)
        client_cls = _corrected(module.DefaultAioHttpClient)
        return client_cls(timeout=timeout)
    except (ImportError, AttributeError, RuntimeError) as exc:  # an older SDK, or no extra
        logger.debug("{} SDK without its aiohttp transport ({}); using httpx", sdk, exc)
        return None


_CLASSES: dict[type, type] = {}


def _corrected(client_cls: type) -> type:
    """`client_cls` with its transports wrapped in `_Remap` (made once per SDK class)."""
    made = _CLASSES.get(client_cls)
    if made is not None:
        return made
    base = next(c for c in client_cls.__mro__ if c.__name__ == "AsyncClient")
    httpx = sys.modules[base.__module__.split(".")[0]]  # httpx2 in openai 3.x, httpx before

    class _Remap(httpx.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            try:
                response = await self.inner.handle_async_request(request)
            except httpx.ConnectTimeout as exc:
                raise _not_a_timeout(httpx, exc, request) from exc.__cause__
            response.stream = _Stream(response.stream, request)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    class _Stream(httpx.AsyncByteStream):  # type: ignore[name-defined,misc]
        """The body, read as a stream (a streamed reply): the same correction mid-stream."""

        def __init__(self, inner: Any, request: Any) -> None:
            self.inner, self.request = inner, request

        async def __aiter__(self) -> Any:
            try:
                async for chunk in self.inner:
                    yield chunk
            except httpx.ConnectTimeout as exc:
                raise _not_a_timeout(httpx, exc, self.request) from exc.__cause__

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Client(client_cls):  # type: ignore[misc]
        def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
            return _Remap(super()._init_transport(*args, **kwargs))

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
            return _Remap(super()._init_proxy_transport(*args, **kwargs))

    _CLASSES[client_cls] = Client
    return Client


def _not_a_timeout(httpx: Any, exc: Exception, request: Any) -> Exception:
    """The httpx error `exc` should have been: itself when aiohttp's error was a timeout."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, asyncio.TimeoutError | TimeoutError):
        return exc
    # `httpx` is the module the SDK uses (httpx2 or httpx), found at run time: untyped here.
    error: Exception
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        error = httpx.RemoteProtocolError(str(cause) or "server disconnected", request=request)
    elif isinstance(cause, aiohttp.ClientConnectorError):
        error = httpx.ConnectError(str(cause), request=request)
    else:
        error = httpx.ReadError(str(cause) or type(cause).__name__, request=request)
    return error
