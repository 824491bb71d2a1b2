"""`POST /admin/api/chats/{platform}/{chat_id}/replay` (issue 40.5): the chat's recorded turns
replayed against another model (`{"model": NAME, "against": MODEL, "limit": N, "since":
DATE}`), answered with the report's JSON (docs/admin-api.md). It spends on models, so owners
only; nothing is sent to the chat."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from chatfn.channels.http.admin.setup_api import Route, _body, _owner
from chatfn.runtime.channel_host import ApiHost


def routes(host: ApiHost) -> list[Route]:
    console = host.console

    async def replay(request: web.Request) -> Any:
        me = _owner(request)
        m = request.match_info
        body = await _body(request)
        return await console.replay(
            me.user, request.remote or "", m["platform"], m["chat_id"], body
        )

    return [("POST", "/admin/api/chats/{platform}/{chat_id}/replay", replay)]
