"""The bearer token check of the bot's web routes (`channels.http.token`).

One check for every owner that guards a route with the token: the HTTP channel's `/v1/*`, the
runtime's `/metrics` (chatfn/runtime/ops_web.py) and `/mcp` (chatfn/channels/mcp/web.py), so
the three take the same header, the same `?token=` fallback and give the same refusal.
"""

from __future__ import annotations

import hmac
from typing import Any

from aiohttp import web

__all__ = ["admitted", "refusal"]


def admitted(request: Any, token: str | None) -> bool:
    """Whether `request` (an aiohttp request) carries `token`: `Authorization: Bearer <token>`,
    else `?token=`; compared in constant time. No token configured: every request."""
    if not token:
        return True
    header = request.headers.get("Authorization", "")
    scheme, _, rest = header.partition(" ")
    given = rest.strip() if scheme.lower() == "bearer" else request.query.get("token", "")
    try:
        raw = given.encode()
    except UnicodeEncodeError:  # a header that was not UTF-8 (aiohttp keeps the bytes)
        raw = b""
    return hmac.compare_digest(raw, token.encode())


def refusal() -> web.Response:
    """The 401 a request without the token gets."""
    return web.json_response(
        {"error": "missing or wrong token: send 'Authorization: Bearer <token>'"}, status=401
    )
