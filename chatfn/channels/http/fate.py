"""`GET /v1/messages/{id}/fate`: what became of a stored user message (issue 40), the same as
`/why` tells in chat, for integrations: {"id", "platform", "chat_id", "sender_id", "fate",
"detail", "told", "sent_at", "since"}. `id` is the message's history row id (the `id` of
`GET /v1/history`). Behind the same token as every /v1 route; 400 for an id that is not one,
404 for no such user message."""

from __future__ import annotations

from aiohttp import web

from chatfn.runtime.channel_host import ApiHost

MAX_ROW_ID = 2**63 - 1


async def get_fate(host: ApiHost, request: web.Request) -> web.Response:
    raw = request.match_info.get("id", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or not 0 < int(raw) <= MAX_ROW_ID:
        return web.json_response(
            {"error": "id: a message id from GET /v1/history (1 or more)", "field": "id"},
            status=400,
        )
    found = await host.fate(int(raw))
    if found is None:
        return web.json_response({"error": f"no user message {raw}"}, status=404)
    return web.json_response(found)
