"""The base of the local fake platforms the channel tests run against (tests/channels/<name>/
<name>_fake.py): what every one of them needs, written once.

- An aiohttp server on 127.0.0.1, port 0 (the port the system gave it in `port`, `base` its
  URL), started and stopped as an async context manager or with `start()` / `stop()`;
  `drop()` cuts every connection and comes back on the same port (a network outage).
- `recorded`: every request it received, `(method, path)` in order, and `wait_for(predicate)`,
  which wakes when the fake calls `notify()` (the fakes do on every change a test waits for),
  instead of a poll.
- Scripted refusals: `refuse_next(path, status, retry_after=..., body=...)` answers the next
  request whose path holds `path` with that status (a 429 with `Retry-After`, a 5xx), and
  `drop_next(path)` closes its connection without an answer; both before the platform's own
  handler runs, so a refused request changes nothing.
- `check(request)`: a hook every request passes first (a fake refusing a bad signature or
  token overrides it and returns the refusal; None lets the request through).

A fake says what it serves in `routes(router)`; the platform's own behaviour (its payloads,
what it refuses, its own rate-limit shapes) stays in the fake.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from aiohttp import web

from tests.kit import bound_port

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class _Scripted:
    """An answer given, instead of the handler's, to the next `count` requests whose path holds
    `path` (and whose method is `method`, when given); `status` 0 closes the connection."""

    path: str
    method: str | None
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    count: int = 1


class FakePlatform:
    """A local platform server on port 0; subclasses add their routes in `routes`."""

    #: The largest request body it reads (aiohttp's default of 1 MiB is too small for uploads).
    client_max_size: ClassVar[int] = 20 * 1024 * 1024
    #: Passed to aiohttp's AppRunner (e.g. `access_log=None`, `shutdown_timeout=0.1`).
    runner_kwargs: ClassVar[dict[str, Any]] = {}
    #: How long `wait_for` waits unless told.
    wait_timeout: ClassVar[float] = 15.0
    host: ClassVar[str] = "127.0.0.1"

    def __init__(self) -> None:
        self.port = 0
        self.recorded: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.scripted_answers = 0  # requests answered by refuse_next / drop_next
        self._scripted: list[_Scripted] = []
        self._sockets: list[web.WebSocketResponse] = []  # closed on stop
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    # -- to override -------------------------------------------------------------------------
    def routes(self, router: web.UrlDispatcher) -> None:
        """Add the platform's routes."""
        raise NotImplementedError

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        """Run before every handler: a response refuses the request (a bad signature, a bad
        token), None lets it through."""
        return None

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on `port` (0 the first time: the system picks; the same port after `drop`)."""
        app = web.Application(client_max_size=self.client_max_size, middlewares=[self._first])
        self.routes(app.router)
        runner = web.AppRunner(app, **self.runner_kwargs)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = bound_port(site)

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        self._sockets.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def drop(self) -> None:
        """Cut every connection and come back on the same port (what a client sees of a
        network outage): a request in flight fails, the next one connects again."""
        await self.stop()
        await self.start()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- waiting -----------------------------------------------------------------------------
    async def notify(self) -> None:
        """Wake every `wait_for` (call it after each change a test may wait for)."""
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        """The first truthy value of `predicate()`, checked now and after every `notify()`;
        TimeoutError after `timeout` seconds (`wait_timeout` unless given)."""
        async with asyncio.timeout(self.wait_timeout if timeout is None else timeout):
            async with self._changed:
                while not (got := predicate()):
                    await self._changed.wait()
                return got

    # -- scripted answers --------------------------------------------------------------------
    def refuse_next(
        self,
        path: str,
        status: int = 429,
        *,
        retry_after: float | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        method: str | None = None,
        count: int = 1,
    ) -> None:
        """Answer the next `count` requests whose path holds `path` with `status`, a
        `Retry-After` header when `retry_after` is given, and `body` (JSON unless a str)."""
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = f"{retry_after:g}"
        self._scripted.append(_Scripted(path, method, status, extra, body, count))

    def drop_next(self, path: str, *, method: str | None = None, count: int = 1) -> None:
        """Close the connection of the next `count` requests whose path holds `path`, with no
        answer at all (a platform's load balancer resetting it)."""
        self._scripted.append(_Scripted(path, method, 0, count=count))

    def _take_scripted(self, request: web.Request) -> _Scripted | None:
        for scripted in self._scripted:
            if scripted.path in request.path and scripted.method in (None, request.method):
                scripted.count -= 1
                if scripted.count <= 0:
                    self._scripted.remove(scripted)
                return scripted
        return None

    @web.middleware
    async def _first(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.recorded.append((request.method, request.path))
        scripted = self._take_scripted(request)
        if scripted is not None:
            self.scripted_answers += 1
            await self.notify()
            if scripted.status == 0:
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError  # aiohttp ends the handler of a lost connection
            return _response(scripted)
        refused = await self.check(request)
        if refused is not None:
            return refused
        return await handler(request)


def _response(scripted: _Scripted) -> web.Response:
    if isinstance(scripted.body, str):
        return web.Response(status=scripted.status, text=scripted.body, headers=scripted.headers)
    return web.Response(
        status=scripted.status,
        text=json.dumps(scripted.body if scripted.body is not None else {}),
        content_type="application/json",
        headers=scripted.headers,
    )


__all__ = ["FakePlatform"]
