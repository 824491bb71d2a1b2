"""The JSON endpoints of the pages that set the bot up (issue 39; docs/admin-api.md): Models
and Channels, and the Restart that makes a saved change take effect. Reading needs an
unscoped user; every change needs an `owner` (`admin.users.NAME.role`, or the bearer token),
is written to config.yaml by the console and audited there."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from chatfn.channels.http.admin.auth import WHO, Identity
from chatfn.runtime.channel_host import ApiHost
from chatfn.runtime.console import ConsoleError

Route = tuple[str, str, Callable[[web.Request], Awaitable[Any]]]


def _unscoped(request: web.Request) -> Identity:
    me: Identity = request[WHO]
    if me.scope.limited:
        raise ConsoleError(403, "this page is for users without a chats: scope")
    return me


def _owner(request: web.Request) -> Identity:
    me = _unscoped(request)
    if not me.owner:
        raise ConsoleError(403, "only an owner may change the models, channels and config")
    return me


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return None
    try:
        return await request.json()
    except ValueError:
        raise ConsoleError(400, "body: a JSON object") from None


def routes(host: ApiHost) -> list[Route]:
    page = host.console.models_page

    async def models(request: web.Request) -> Any:
        _unscoped(request)
        return page.listing()

    async def save(request: web.Request) -> Any:
        me = _owner(request)
        name = request.match_info["name"]
        return await page.save(me.user, request.remote or "", name, await _body(request))

    async def remove(request: web.Request) -> Any:
        me = _owner(request)
        return await page.remove(me.user, request.remote or "", request.match_info["name"])

    async def default(request: web.Request) -> Any:
        me = _owner(request)
        return await page.set_default(me.user, request.remote or "", await _body(request))

    async def test(request: web.Request) -> Any:
        me = _owner(request)
        return await page.test(me.user, request.remote or "", request.match_info["name"])

    channels = host.console.channels_page

    async def channel_list(request: web.Request) -> Any:
        _unscoped(request)
        return channels.listing()

    async def channel_save(request: web.Request) -> Any:
        me = _owner(request)
        name = request.match_info["name"]
        return await channels.save(me.user, request.remote or "", name, await _body(request))

    async def channel_test(request: web.Request) -> Any:
        me = _owner(request)
        return await channels.test(me.user, request.remote or "", request.match_info["name"])

    async def channel_login(request: web.Request) -> Any:
        me = _owner(request)
        name = request.match_info["name"]
        return await host.console.channel_logins.start(me.user, request.remote or "", name)

    async def channel_login_status(request: web.Request) -> Any:
        _owner(request)
        return host.console.channel_logins.status(request.match_info["name"])

    async def restart(request: web.Request) -> Any:
        me = _owner(request)
        return await host.console.restart(me.user, request.remote or "")

    return [
        ("POST", "/admin/api/restart", restart),
        ("GET", "/admin/api/channels", channel_list),
        ("PUT", "/admin/api/channels/{name}", channel_save),
        ("POST", "/admin/api/channels/{name}/test", channel_test),
        ("POST", "/admin/api/channels/{name}/login", channel_login),
        ("GET", "/admin/api/channels/{name}/login", channel_login_status),
        ("GET", "/admin/api/models", models),
        ("PUT", "/admin/api/models/default", default),
        ("PUT", "/admin/api/models/{name}", save),
        ("DELETE", "/admin/api/models/{name}", remove),
        ("POST", "/admin/api/models/{name}/test", test),
    ]
