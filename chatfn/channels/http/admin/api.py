"""The JSON endpoints under `/admin/api/` (docs/admin-api.md has each shape). Each handler
reads its parameters, calls `host.console` and writes the answer; a `ConsoleError` becomes its
status and `{"error": ...}`. Who asks is `request["admin"]` (auth.py), and the user's scope
goes with every call, so a scoped user's lists hold only their chats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from chatfn.channels.http.admin import logs, replay_api, setup_api
from chatfn.channels.http.admin.auth import WHO, Identity
from chatfn.common.version import __version__
from chatfn.runtime.channel_host import ApiHost
from chatfn.runtime.console import ConsoleError, ConsoleRoute, ConsoleView

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(handler: Callable[[web.Request], Awaitable[Any]]) -> Handler:
    """`handler`'s value as JSON (a StreamResponse as it is); a ConsoleError as its status."""

    async def run(request: web.Request) -> web.StreamResponse:
        try:
            value = await handler(request)
        except ConsoleError as exc:
            return web.json_response(exc.body(), status=exc.status)
        if isinstance(value, web.StreamResponse):
            return value
        return web.json_response(value, dumps=_dumps, headers={"Cache-Control": "no-store"})

    run.__name__ = handler.__name__
    return run


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def who(request: web.Request) -> Identity:
    return request[WHO]


def _int(request: web.Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19 or not low <= int(text) <= high:
        raise ConsoleError(400, f"{name}: a whole number from {low} to {high}", name)
    return int(text)


# A message's fates (function_calls/fates.py FATES), for `?fate=` of a chat's history.
FATES = (
    "answered",
    "function",
    "declined",
    "not_addressed",
    "ignored",
    "held",
    "failed",
    "expired",
)


def _choice(request: web.Request, name: str, allowed: tuple[str, ...], default: str) -> str:
    value = request.query.get(name, default) or default
    if value not in allowed:
        raise ConsoleError(400, f"{name}: one of {', '.join(a for a in allowed if a)}", name)
    return value


def _chat_param(raw: str | None) -> tuple[str, str] | None:
    if not raw:
        return None
    platform, sep, chat_id = raw.partition(":")
    if not sep or not platform or not chat_id:
        raise ConsoleError(400, "chat: platform:chat_id", "chat")
    return platform, chat_id


def _unscoped(me: Identity) -> None:
    if me.scope.limited:
        raise ConsoleError(403, "this page is for users without a chats: scope")


def _address(request: web.Request) -> str:
    return request.remote or ""


class Api:
    def __init__(self, host: ApiHost) -> None:
        self.host = host
        self.console = host.console

    async def session(self, request: web.Request) -> dict[str, Any]:
        me = who(request)
        return {
            "user": me.user,
            "csrf": me.csrf,
            "scoped": me.scope.limited,
            "chats": list(me.scope.patterns) if me.scope.patterns is not None else None,
            "language": self.host.settings.bot.language,
            "version": __version__,
            "expires_at": me.expires_at,
            "bearer": me.bearer,
            "owner": me.owner,  # may change the models, channels and config
            # The plugins' pages (their console views): name, module, words.
            "pages": self.console.pages(),
            # The lists of the plugins' health answers the overview and plugins page draw.
            "panels": self.console.panels(),
        }

    async def overview(self, request: web.Request) -> dict[str, Any]:
        days = _int(request, "days", 7, 1, 90)
        return await self.console.overview(who(request).scope, days or 7)

    async def chats(self, request: web.Request) -> dict[str, Any]:
        q = request.query
        return await self.console.chats.listing(
            who(request).scope,
            q.get("q", "").strip(),
            q.get("platform", "").strip(),
            _choice(request, "kind", ("", "group", "private"), ""),
            _int(request, "active_days", None, 1, 3650),
            _int(request, "limit", 50, 1, 500) or 50,
            _int(request, "offset", 0, 0, 10**9) or 0,
        )

    async def chat(self, request: web.Request) -> dict[str, Any]:
        m = request.match_info
        return await self.console.chats.detail(who(request).scope, m["platform"], m["chat_id"])

    async def patch_settings(self, request: web.Request) -> dict[str, Any]:
        m = request.match_info
        try:
            body = await request.json()
        except ValueError:
            raise ConsoleError(400, "body: a JSON object") from None
        me = who(request)
        return await self.console.chats.patch(
            me.scope, me.user, _address(request), m["platform"], m["chat_id"], body
        )

    async def reset(self, request: web.Request) -> dict[str, Any]:
        m = request.match_info
        me = who(request)
        return await self.console.chats.reset(
            me.scope, me.user, _address(request), m["platform"], m["chat_id"]
        )

    async def history(self, request: web.Request) -> dict[str, Any]:
        m = request.match_info
        fate = _choice(request, "fate", ("", *FATES), "") or None  # issue 40: ?fate=declined
        return await self.console.chats.history(
            who(request).scope,
            m["platform"],
            m["chat_id"],
            _int(request, "limit", 50, 1, 500) or 50,
            _int(request, "before", None, 1, 2**63 - 1),
            fate=fate,
            days=_int(request, "days", None, 1, 3650),
        )

    async def turn(self, request: web.Request) -> dict[str, Any]:
        m = request.match_info
        return await self.console.turn(
            who(request).scope, m["platform"], m["chat_id"], m["message_id"]
        )

    async def usage(self, request: web.Request) -> Any:
        group_by = _choice(request, "group_by", ("model", "chat", "user"), "model")
        days = _int(request, "days", 7, 1, 90) or 7
        found = await self.console.usage(who(request).scope, group_by, days)
        if _choice(request, "format", ("json", "csv"), "json") == "csv":
            return web.Response(
                text=self.console.usage_csv(found),
                content_type="text/csv",
                charset="utf-8",
                headers={
                    "Content-Disposition": f'attachment; filename="usage-{group_by}-{days}d.csv"',
                    "Cache-Control": "no-store",
                },
            )
        found.pop("rows")
        return found

    def view_route(self, view: ConsoleView, route: ConsoleRoute) -> Callable[..., Any]:
        """A plugin's route (`Plugin(console=[ConsoleView(...)])`): its parameters, query and
        JSON body handed to the plugin's handler through the console, with the user's scope."""

        async def handler(request: web.Request) -> dict[str, Any]:
            body = None
            if request.method != "GET" and request.can_read_body:
                try:
                    body = await request.json()
                except ValueError:
                    raise ConsoleError(400, "body: JSON") from None
            me = who(request)
            return await self.console.view_call(
                view,
                route,
                me.scope,
                me.user,
                _address(request),
                dict(request.query),
                dict(request.match_info),
                body,
            )

        handler.__name__ = f"{view.name}_{route.method.lower()}"
        return handler

    async def page_module(self, request: web.Request) -> web.StreamResponse:
        """A plugin view's page, the JavaScript module the single-page app imports."""
        path = self.console.page(request.match_info["name"])
        if path is None or not path.is_file():
            raise ConsoleError(404, f"no page {request.match_info['name']}")
        return web.FileResponse(
            path, headers={"Content-Type": "text/javascript", "Cache-Control": "no-store"}
        )

    async def delivery(self, request: web.Request) -> dict[str, Any]:
        q = request.query
        return await self.console.delivery(
            who(request).scope,
            _choice(request, "state", ("", "pending", "expired", "failed", "all"), ""),
            q.get("platform", "").strip(),
            q.get("chat_id", "").strip(),
            _int(request, "limit", 50, 1, 500) or 50,
            _int(request, "before", None, 1, 2**63 - 1),
        )

    async def retry(self, request: web.Request) -> dict[str, Any]:
        me = who(request)
        raw = request.match_info["id"]
        if not raw.isdigit() or len(raw) > 19:
            raise ConsoleError(404, f"no outbox row {raw}")
        return await self.console.retry(me.scope, me.user, _address(request), int(raw))

    async def plugins(self, request: web.Request) -> dict[str, Any]:
        me = who(request)
        _unscoped(me)
        result: dict[str, Any] = self.console.plugin_page.listing(me.user)
        return result

    def plugin_route(self, name: str) -> Callable[[web.Request], Awaitable[Any]]:
        """The Plugins page's routes (chatfn/runtime/console/plugins.py): unscoped users; the
        market's changes for owners where admin.allow_plugin_install is on."""

        async def handler(request: web.Request) -> Any:
            me = who(request)
            _unscoped(me)
            body = None
            if request.method != "GET" and request.can_read_body:
                try:
                    body = await request.json()
                except ValueError:
                    raise ConsoleError(400, "body: JSON") from None
            page, m, at = self.console.plugin_page, request.match_info, _address(request)
            if name == "state":
                on = body.get("on") if isinstance(body, dict) else None
                if not isinstance(on, bool):
                    raise ConsoleError(400, 'body: {"on": true|false}', "on")
                return await page.turn(me.user, at, m["name"], on)
            if name == "chat_get":
                return await page.chat_states(me.scope, m["name"], request.query.get("chat", ""))
            if name == "chat":
                return await page.chat_turn(me.scope, me.user, at, m["name"], body)
            if name == "settings_get":
                return page.settings_form(m["name"])
            if name == "settings":
                return await page.configure(me.user, at, m["name"], body)
            if name == "market":
                return await page.market(request.query.get("q", "").strip())
            if name == "plan":
                upgrade = bool(isinstance(body, dict) and body.get("upgrade"))
                return await page.plan(me.user, at, body, upgrade=upgrade)
            if name == "confirm":
                return await page.confirm(me.user, at, body)
            return await page.remove(me.user, at, m["name"])

        handler.__name__ = f"plugins_{name}"
        return handler

    async def check(self, request: web.Request) -> dict[str, Any]:
        me = who(request)
        _unscoped(me)
        online = False
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                raise ConsoleError(400, 'body: a JSON object such as {"online": true}') from None
            online = bool(isinstance(body, dict) and body.get("online"))
        return await self.console.check(me.user, _address(request), online)

    async def audit(self, request: web.Request) -> dict[str, Any]:
        user = request.query.get("user") or None
        return await self.console.audit_page(
            who(request).scope,
            _int(request, "limit", 50, 1, 500) or 50,
            _int(request, "before", None, 1, 2**63 - 1),
            _chat_param(request.query.get("chat")),
            user,
        )


#: The Plugins page's (docs/admin-api.md "Plugins"): method, path, `Api.plugin_route` name.
PLUGIN_ROUTES = [
    ("POST", "plugins/{name}/state", "state"),
    ("GET", "plugins/{name}/chat", "chat_get"),
    ("POST", "plugins/{name}/chat", "chat"),
    ("GET", "plugins/{name}/settings", "settings_get"),
    ("PUT", "plugins/{name}/settings", "settings"),
    ("GET", "market", "market"),
    ("POST", "market/plan", "plan"),
    ("POST", "market/confirm", "confirm"),
    ("DELETE", "market/{name}", "remove"),
]


def add_routes(app: web.Application, host: ApiHost) -> None:
    api = Api(host)
    chat = "/admin/api/chats/{platform}/{chat_id}"
    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[Any]]]] = [
        ("GET", "/admin/api/session", api.session),
        ("GET", "/admin/api/overview", api.overview),
        ("GET", "/admin/api/chats", api.chats),
        ("GET", chat, api.chat),
        ("PATCH", chat + "/settings", api.patch_settings),
        ("POST", chat + "/reset", api.reset),
        ("GET", chat + "/history", api.history),
        ("GET", "/admin/api/turns/{platform}/{chat_id}/{message_id}", api.turn),
        ("GET", "/admin/api/usage", api.usage),
        ("GET", "/admin/api/delivery", api.delivery),
        ("POST", "/admin/api/delivery/{id}/retry", api.retry),
        ("GET", "/admin/api/plugins", api.plugins),
        *[
            (method, f"/admin/api/{path}", api.plugin_route(name))
            for method, path, name in PLUGIN_ROUTES
        ],
        ("POST", "/admin/api/check", api.check),
        ("GET", "/admin/api/audit", api.audit),
        *setup_api.routes(host),  # Models (setup_api.py, issue 39)
        *replay_api.routes(host),  # a chat's replay (replay_api.py, issue 40.5)
    ]
    for view in host.console.views():  # the plugins' own (the reminders page is one)
        routes += [
            (route.method, f"/admin/api/{route.path}", api.view_route(view, route))
            for route in view.routes
        ]
    routes.append(("GET", "/admin/api/pages/{name}.js", api.page_module))
    for method, path, handler in routes:
        app.router.add_route(method, path, _json(handler))
    app.router.add_get("/admin/api/logs", logs.stream(host))
    # Anything else under /admin/api/: JSON, not the single-page app.
    app.router.add_route("*", "/admin/api/{rest:.*}", _json(_unknown))


async def _unknown(request: web.Request) -> Any:
    raise ConsoleError(404, f"no such endpoint: {request.method} {request.path}")
