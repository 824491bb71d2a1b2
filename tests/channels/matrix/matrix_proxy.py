"""An HTTP proxy between the Matrix channel and the real Synapse of the tests, for what a
homeserver cannot be asked to do on demand: answer the next send to a room with
`429 M_LIMIT_EXCEEDED` and a `retry_after_ms` (the spec's rate-limit error,
https://spec.matrix.org/v1.16/client-server-api/#rate-limiting), drop every open
connection (a network cut under a long /sync poll), and refuse a token as revoked.
Everything else is passed through as it is, and each `PUT .../send/{type}/{txnId}` is
recorded, so a test sees which transaction ids the channel used and how often.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any
from urllib.parse import unquote

import aiohttp
from aiohttp import web

from tests.kit import bound_port

_SEND = re.compile(r"^/_matrix/client/(?:v3|r0)/rooms/([^/]+)/send/([^/]+)/([^/]+)$")
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class MatrixProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.url = ""
        self.txns: Counter[str] = Counter()  # transaction ids of sends, as often as PUT
        self.sends: list[tuple[str, str]] = []  # (room id, txn id) in order
        self.limited = 0  # 429s answered
        self.requests: list[tuple[str, str, bool]] = []  # (method, path, had a bearer token)
        self._limit: dict[str, float] = {}  # room id -> retry_after_ms for its next send
        self._fail: dict[str, tuple[int, int]] = {}  # path part -> (requests left, status)
        self.failed = 0
        self.refused_token: str | None = None  # answered 401 M_UNKNOWN_TOKEN (revoked)
        self._open: dict[asyncio.Task[Any], asyncio.BaseTransport | None] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> MatrixProxy:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = bound_port(site)
        self.url = f"http://127.0.0.1:{port}"
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.drop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def fail_next(self, path_part: str, count: int, status: int = 502) -> None:
        """The next `count` requests whose path holds `path_part` get `status` (a homeserver
        behind a restarting reverse proxy)."""
        self._fail[path_part] = (count, status)

    def rate_limit_next(self, room_id: str, retry_after_ms: float) -> None:
        self._limit[room_id] = retry_after_ms

    @property
    def in_flight(self) -> int:
        """How many requests are passing through now."""
        return len(self._open)

    def drop(self) -> int:
        """Abort every connection that has a request in flight (the bot's /sync poll among
        them); returns how many."""
        dropped = list(self._open.items())
        self._open.clear()
        for task, transport in dropped:
            if transport is not None:
                transport.abort()
            task.cancel()
        return len(dropped)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = request.transport
        try:
            return await self._pass(request)
        except aiohttp.ClientError as exc:
            return web.json_response({"errcode": "M_UNKNOWN", "error": repr(exc)}, status=502)
        finally:
            self._open.pop(task, None)

    async def _pass(self, request: web.Request) -> web.StreamResponse:
        for part, (left, status) in list(self._fail.items()):
            if part in request.path and left > 0:
                self._fail[part] = (left - 1, status)
                self.failed += 1
                return web.Response(status=status, text="<html>Bad Gateway</html>")
        if self.refused_token and request.headers.get("Authorization") == (
            f"Bearer {self.refused_token}"
        ):
            return web.json_response(
                {"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token passed."},
                status=401,
            )
        bearer = request.headers.get("Authorization", "").startswith("Bearer ")
        self.requests.append((request.method, request.path, bearer))
        send = _SEND.match(request.path) if request.method == "PUT" else None
        if send is not None:
            room = _unquote(send.group(1))
            wait = self._limit.pop(room, None)
            if wait is not None:
                self.limited += 1
                return web.json_response(
                    {
                        "errcode": "M_LIMIT_EXCEEDED",
                        "error": "Too Many Requests",
                        "retry_after_ms": int(wait),
                    },
                    status=429,
                )
            txn = _unquote(send.group(3))
            self.txns[txn] += 1
            self.sends.append((room, txn))
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            data = await upstream.read()
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            return web.Response(status=upstream.status, body=data, headers=out)


def _unquote(value: str) -> str:
    return unquote(value)
