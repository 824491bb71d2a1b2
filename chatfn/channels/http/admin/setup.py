"""The console's first run (issue 39): with no `admin.users`, the console is mounted in
first-run mode, where only `GET/POST /admin/setup` (and the static assets) answer; everything
else is refused. The link the bot prints (`/admin/setup?token=...`) opens a form that makes the
first `owner` user (written to config.yaml by chatfn/runtime/console/setup.py), signs it in and
ends first-run mode. The token lasts an hour and one use."""

from __future__ import annotations

import asyncio
import html
import secrets
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.channels.http.admin import pages
from chatfn.channels.http.admin.passwords import hash_password
from chatfn.runtime.console import ConsoleError

MIN_PASSWORD = 10
TOKEN_INPUT = '<input type="hidden" name="token" value="">'
GONE = (
    "<!doctype html><meta charset='utf-8'><title>chatfn admin</title>"
    "<p>This setup link is used or expired.</p><p>{what}</p>"
    "<p lang='zh-CN'>此设置链接已使用或已过期：请在 /admin/login 登录，或运行 `chatfn check` "
    "获取新链接。</p>"
)


def _gone(what: str) -> web.Response:
    return web.Response(
        status=403,
        text=GONE.format(what=html.escape(what)),
        content_type="text/html",
        charset="utf-8",
        headers=pages.HEADERS,
    )


class Setup:
    def __init__(self, auth: Any) -> None:  # auth.AdminAuth
        self.auth = auth
        self.console = auth.console

    def announce(self, port: int | None) -> None:
        """The start-up line with the link (once per start, only while there is no user)."""
        settings: Any = self.console.settings  # the runtime's Settings (config_file)
        # Only with a config file (`chatfn init` writes one): the owner is written there.
        if settings.config_file is not None and self.console.setup_needed():
            url = self.console.setup_link(port)
            logger.warning(
                "admin console first run: open {} to create the owner user (one use, one hour)",
                url,
            )

    async def page(self, request: web.Request) -> web.Response:
        given = request.query.get("token", "")
        if not self.console.setup_valid(given):
            return _gone("Sign in at /admin/login, or run `chatfn check` for a new link.")
        text = pages._text("setup.html")
        field = f'<input type="hidden" name="token" value="{html.escape(given)}">'
        return web.Response(
            text=text.replace(TOKEN_INPUT, field, 1),
            content_type="text/html",
            charset="utf-8",
            headers=pages.HEADERS,
        )

    async def create(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        given = str(form.get("token", ""))
        if not self.console.setup_valid(given):
            return _gone("Sign in at /admin/login, or run `chatfn check` for a new link.")
        name = str(form.get("username", "")).strip()[:64]
        password = str(form.get("password", ""))[:1024]
        again = str(form.get("password2", ""))[:1024]
        back = f"/admin/setup?token={given}&error="
        if len(password) < MIN_PASSWORD:
            raise web.HTTPSeeOther(back + "short")
        if password != again:
            raise web.HTTPSeeOther(back + "differ")
        stored = await asyncio.to_thread(hash_password, password)
        try:
            await self.console.create_owner(name, stored, given)
        except ConsoleError as exc:
            if exc.status == 400 and exc.field == "username":
                raise web.HTTPSeeOther(back + "name") from None
            return _gone(exc.message)
        address = request.remote or ""
        await self.console.audit(name, address, "setup.owner", detail={"role": "owner"})
        logger.info("admin console: owner {} created from {}", name, address)
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await self.console.open_session(name, token, csrf, address)
        resp = web.HTTPSeeOther("/admin/")
        self.auth.set_cookie(request, resp, token)
        raise resp


def add_routes(app: web.Application, setup: Setup) -> None:
    app.router.add_get("/admin/setup", setup.page)
    app.router.add_post("/admin/setup", setup.create)
