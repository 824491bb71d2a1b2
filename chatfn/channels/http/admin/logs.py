"""`GET /admin/api/logs`: the live log tail as Server-Sent Events (`event: log`), filtered by
`chat` and `level`, secrets masked (chatfn/runtime/console/logs.py), a keep-alive comment every 15
s,
`event: closing` when the bot stops or the client goes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from chatfn.channels.http.admin.auth import WHO
from chatfn.runtime.channel_host import ApiHost
from chatfn.runtime.console import LEVELS

KEEP_ALIVE = 15.0


def stream(host: ApiHost) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def logs(request: web.Request) -> web.StreamResponse:
        level = request.query.get("level", "INFO").upper()
        if level not in LEVELS:
            return web.json_response(
                {"error": f"level: one of {', '.join(LEVELS)}", "field": "level"}, status=400
            )
        chat = request.query.get("chat") or None
        if chat is not None and ":" in chat:
            chat = chat.partition(":")[2]
        tail = host.console.logs
        watcher = tail.watch(level, chat, request[WHO].scope)
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        try:
            await resp.prepare(request)
            await resp.write(b": connected\n\n")
            while not host.closing:
                try:
                    line = await asyncio.wait_for(watcher.queue.get(), KEEP_ALIVE)
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
                    continue
                data = json.dumps(line, ensure_ascii=False)
                await resp.write(f"event: log\ndata: {data}\n\n".encode())
            with contextlib.suppress(ConnectionResetError):
                await resp.write(b'event: closing\ndata: {"reason": "the bot is stopping"}\n\n')
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            tail.unwatch(watcher)
        return resp

    return logs
