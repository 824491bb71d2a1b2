"""Who is asking, for every path under `/admin/`: a session cookie (set by `POST /admin/login`,
HttpOnly, SameSite=Strict, Secure over HTTPS, ended by `admin.session_hours` or logout) or the
HTTP channel's token as `Authorization: Bearer` (a script). A session's state-changing request
carries its CSRF token in `X-CSRF-Token`. Pages without a session go to the login page; the API
answers 401. The login page and the static assets need nothing (no data in them).

The login itself is guarded against login CSRF (another site's form signing the victim's
browser into the attacker's account: SameSite governs sending a cookie, not setting one) by
login.py: the form's token and the request's own Sec-Fetch-Site and Origin."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.channels.http.admin import login as guard
from chatfn.channels.http.admin import pages
from chatfn.channels.http.admin.limiter import LoginLimiter
from chatfn.channels.http.admin.pages import SECURITY_HEADERS
from chatfn.channels.http.admin.passwords import verify_password
from chatfn.channels.http.proxy import is_https
from chatfn.runtime.console import Console, Scope

COOKIE = "chatfn_admin"
CHANGES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
OPEN = ("/admin/static/", "/admin/login")
SETUP = "/admin/setup"  # the first run's page (setup.py): the only other path while no user exists
MAX_NAME = 64
MAX_PASSWORD = 1024


@dataclass(frozen=True, slots=True)
class Identity:
    """The console user of a request (`request["admin"]`)."""

    user: str
    scope: Scope
    csrf: str | None  # None: a bearer-token client (no cookie, no CSRF)
    expires_at: str | None = None
    # `owner` (or the bearer token): may change the models, channels and config.
    owner: bool = False

    @property
    def bearer(self) -> bool:
        return self.csrf is None


RATE_LIMITED = (
    "<!doctype html><meta http-equiv='refresh' content='0; url=/admin/login?error=rate'>"
    "<p>Too many failed logins: try again later.</p>"
)
# Where the middleware leaves who is asking (a typed key from aiohttp 3.12; a string before).
WHO: Any = web.RequestKey("admin", Identity) if hasattr(web, "RequestKey") else "admin"


def _refused(request: web.Request, error: str, status: int = 401) -> web.StreamResponse:
    if status == 401 and request.method == "GET" and not request.path.startswith("/admin/api/"):
        raise web.HTTPSeeOther("/admin/login")
    return web.json_response({"error": error}, status=status)


class AdminAuth:
    def __init__(self, console: Console, token: str | None, trust_proxy: bool = False) -> None:
        self.console = console
        self.token = token
        # channels.http.trust_proxy: X-Forwarded-Proto / -Host say what the browser used.
        self.trust_proxy = trust_proxy
        self.limiter = LoginLimiter()
        self.setup: Any = None  # the first run's page (setup.py), set by mount
        guard.dummy_for(console.settings.admin.users)  # made now, not in the first login's time

    # -- every request -------------------------------------------------------------------------
    def _bearer(self, request: web.Request) -> bool | None:
        """True: the channel's token; False: another one; None: no bearer header."""
        scheme, _, rest = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        try:
            given = rest.strip().encode()
        except UnicodeEncodeError:
            return False
        return bool(self.token) and hmac.compare_digest(given, (self.token or "").encode())

    async def identify(self, request: web.Request) -> Identity | None:
        bearer = self._bearer(request)
        if bearer is not None:
            if bearer:
                return Identity("bearer", Scope(), None, owner=True)
            return None
        token = request.cookies.get(COOKIE, "")
        if not token or len(token) > 128:
            return None
        row = await self.console.session(token)
        if row is None:
            return None
        scope = self.console.scope_of(row.user)
        if scope is None:  # the user was removed from the config: the login ends with it
            return None
        user = self.console.user(row.user)
        return Identity(
            row.user,
            scope,
            row.csrf,
            row.expires_at.isoformat().replace("+00:00", "Z"),
            owner=user is not None and user.role == "owner" and not scope.limited,
        )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if not (path == "/admin" or path.startswith("/admin/")):
            return await handler(request)
        response = await self._admitted(request, handler)
        # Every answer under /admin/ (the static copies of the pages too): no inline script.
        if not response.prepared:  # (a log stream has sent its headers already)
            for name, value in SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
        return response

    async def _admitted(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if path.startswith(OPEN[0]):
            return await handler(request)
        if not self.console.settings.admin.users:  # first run: only the setup page
            if path == SETUP:
                return await handler(request)
            why = "first run: open the setup link the bot printed (or run `chatfn check`)"
            if path.startswith("/admin/api/"):
                return web.json_response({"error": why}, status=403)
            text = f"{why}\n首次运行：请打开机器人打印的设置链接（或运行 `chatfn check`）。\n"
            return web.Response(status=403, text=text, charset="utf-8", headers=pages.HEADERS)
        if path == OPEN[1]:
            return await handler(request)
        who = await self.identify(request)
        if who is None:
            if self._bearer(request) is False:
                return web.json_response({"error": "wrong bearer token"}, status=401)
            return _refused(
                request,
                "log in first: POST /admin/login, or send Authorization: "
                "Bearer <channels.http.token>",
            )
        if request.method in CHANGES and who.csrf is not None:
            given = request.headers.get("X-CSRF-Token", "")
            if not hmac.compare_digest(given.encode(errors="replace"), who.csrf.encode()):
                return web.json_response(
                    {
                        "error": "missing or wrong CSRF token: send X-CSRF-Token from "
                        "/admin/api/session"
                    },
                    status=403,
                )
        request[WHO] = who
        return await handler(request)

    # -- login and logout ----------------------------------------------------------------------
    async def _password_ok(self, name: str, password: str) -> bool:
        """Exactly one scrypt check of the same cost whoever `name` is (a hashed user, one whose
        password comes from the environment, or nobody), so the answer's time tells nothing."""
        user = self.console.user(name)
        stored = user.password_hash if user is not None else None
        dummy = guard.dummy_for(self.console.settings.admin.users)
        matches = await asyncio.to_thread(verify_password, password, stored or dummy)
        if user is None:
            return False
        if stored is not None:
            return matches
        secret = user.password.get_secret_value() if user.password is not None else ""
        return bool(secret) and guard.same_secret(password, secret)

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name = str(form.get("username", ""))[:MAX_NAME].strip()
        password = str(form.get("password", ""))[:MAX_PASSWORD]
        address = request.remote or ""
        why = guard.refusal(request, form, self.trust_proxy)
        if why is not None:
            # Not counted as a failure: another site's page must not lock the user out.
            logger.warning("admin login of {!r} from {} refused: {}", name, address, why)
            await self.console.audit(name or "?", address, "login.refused", detail={"why": why})
            return guard.refused_page(why)
        wait = self.limiter.retry_after(name, address)
        if wait is not None:
            logger.warning("admin login of {!r} from {} refused: too many failures", name, address)
            # 429 for scripts; a browser's form post is sent on to the login page, which says
            # why (`?error=rate`).
            return web.Response(
                status=429,
                text=RATE_LIMITED,
                content_type="text/html",
                headers={"Retry-After": str(int(wait))},
            )
        if not name or not password or not await self._password_ok(name, password):
            self.limiter.failed(name, address)
            await self.console.audit(name or "?", address, "login.failed")
            logger.warning("admin login of {!r} from {} failed", name, address)
            raise web.HTTPSeeOther("/admin/login?error=1")
        self.limiter.succeeded(name, address)
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await self.console.open_session(name, token, csrf, address)
        await self.console.audit(name, address, "login")
        logger.info("admin {} logged in from {}", name, address)
        resp = web.HTTPSeeOther("/admin/")
        self.set_cookie(request, resp, token)
        raise resp

    def set_cookie(self, request: web.Request, resp: web.StreamResponse, token: str) -> None:
        resp.set_cookie(
            COOKIE,
            token,
            max_age=int(self.console.settings.admin.session_hours * 3600),
            path="/admin",
            httponly=True,
            samesite="Strict",
            secure=is_https(request, self.trust_proxy),
        )

    async def logout(self, request: web.Request) -> web.StreamResponse:
        who = request[WHO]
        token = request.cookies.get(COOKIE, "")
        if token:
            await self.console.end_session(token)
        await self.console.audit(who.user, request.remote or "", "logout")
        resp = web.HTTPSeeOther("/admin/login")
        resp.del_cookie(COOKIE, path="/admin")
        raise resp
