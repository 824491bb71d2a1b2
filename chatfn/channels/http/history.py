"""`GET /v1/history?chat_id=...&limit=...&before=...`: a chat's stored messages, oldest first,
for the web page after a reload and for any API client. Behind the same token as every /v1
route; a bad parameter is a 400 naming it."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from chatfn.common.messages import surrogate_at
from chatfn.runtime.channel_host import ApiHost, HistoryEntry

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_ROW_ID = 2**63 - 1
PARAMETERS = ("chat_id", "limit", "before", "token")


def _bad(field: str, error: str) -> web.Response:
    return web.json_response({"error": f"{field}: {error}", "field": field}, status=400)


def _whole(raw: str, low: int, high: int) -> int | None:
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if low <= value <= high else None


def entry_json(entry: HistoryEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "role": entry.role,
        "text": entry.text,
        "sender_id": entry.sender_id,
        "sender_name": entry.sender_name,
        "time": entry.time.isoformat().replace("+00:00", "Z"),
        "message_id": entry.message_id or None,
    }


async def get_history(host: ApiHost, platform: str, request: web.Request) -> web.Response:
    query = request.query
    for name in query:
        if name not in PARAMETERS:
            return _bad(name, "unknown parameter (use chat_id, limit, before)")
    chat_id = query.get("chat_id", "")
    if not chat_id.strip():
        return _bad("chat_id", "required: the chat whose messages to show (group:team1)")
    if len(chat_id) > 128:
        return _bad("chat_id", "at most 128 characters")
    at = surrogate_at(chat_id)
    if at is not None:
        return _bad("chat_id", f"not valid Unicode (a lone surrogate at position {at})")
    limit = DEFAULT_LIMIT
    if "limit" in query:
        given = _whole(query["limit"], 1, MAX_LIMIT)
        if given is None:
            return _bad("limit", f"an integer from 1 to {MAX_LIMIT} (got {query['limit'][:20]!r})")
        limit = given
    before = None
    if "before" in query:
        before = _whole(query["before"], 1, MAX_ROW_ID)
        if before is None:
            return _bad("before", f"a message id from 1 to {MAX_ROW_ID}")
    entries = await host.history(platform, chat_id, limit, before)
    return web.json_response({"chat_id": chat_id, "messages": [entry_json(e) for e in entries]})
