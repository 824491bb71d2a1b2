"""Who is asking, for every path under `/admin/`: a session cookie (set by `POST /admin/login`,
HttpOnly, SameSite=Strict, ended by `admin.session_hours` or logout) or the HTTP channel's
token as `Authorization: Bearer` (a script). A session's state-changing request carries its
CSRF token in `X-CSRF-Token`. Pages without a session go to the login page; the API answers
401. The login page and the static assets need nothing (no data in them)."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.channels.http.admin.limiter import LoginLimiter
from chatfn.channels.http.admin.passwords import dummy_hash, verify_password
from chatfn.runtime.console import Console, Scope

COOKIE = "chatfn_admin"
CHANGES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
OPEN = ("/admin/static/", "/admin/login")
MAX_NAME = 64
MAX_PASSWORD = 1024


@dataclass(frozen=True, slots=True)
class Identity:
    """The console user of a request (`request["admin"]`)."""

    user: str
    scope: Scope
    csrf: str | None  # None: a bearer-token client (no cookie, no CSRF)
    expires_at: str | None = None

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
    def __init__(self, console: Console, token: str | None) -> None:
        self.console = console
        self.token = token
        self.limiter = LoginLimiter()

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
                return Identity("bearer", Scope(), None)
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
        return Identity(
            row.user, scope, row.csrf, row.expires_at.isoformat().replace("+00:00", "Z")
        )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if not (path == "/admin" or path.startswith("/admin/")):
            return await handler(request)
        if path.startswith(OPEN[0]) or path == OPEN[1]:
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
        user = self.console.user(name)
        if user is None:
            await asyncio.to_thread(verify_password, password, dummy_hash())
            return False
        if user.password_hash is not None:
            return await asyncio.to_thread(verify_password, password, user.password_hash)
        secret = user.password.get_secret_value() if user.password is not None else ""
        return bool(secret) and hmac.compare_digest(password.encode(), secret.encode())

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name = str(form.get("username", ""))[:MAX_NAME].strip()
        password = str(form.get("password", ""))[:MAX_PASSWORD]
        address = request.remote or ""
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
        resp.set_cookie(
            COOKIE,
            token,
            max_age=int(self.console.settings.admin.session_hours * 3600),
            path="/admin",
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )
        raise resp

    async def logout(self, request: web.Request) -> web.StreamResponse:
        who = request[WHO]
        token = request.cookies.get(COOKIE, "")
        if token:
            await self.console.end_session(token)
        await self.console.audit(who.user, request.remote or "", "logout")
        resp = web.HTTPSeeOther("/admin/login")
        resp.del_cookie(COOKIE, path="/admin")
        raise resp
