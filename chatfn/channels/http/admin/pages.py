"""The console's HTML: `static/login.html` (no session needed) and `static/index.html`, a
single-page app, for `/admin/` and every `/admin/<page>` (the pages are adminui's: this module
only serves them). Static assets under `/admin/static/` carry no data and need no session.

The login page is sent with the login token of login.py in its form (and the same in a
cookie). Every answer under `/admin/` carries `SECURITY_HEADERS` (auth.py's middleware): its
Content-Security-Policy runs only script files of this origin, so a text that slipped into a
page as HTML could not run; the pages have no inline script and load only vendored files."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from chatfn.channels.http.admin import login as guard

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Served when the pages are not installed (a build without them): says so instead of a 404.
MISSING = (
    "<!doctype html><html><head><meta charset='utf-8'><title>chatfn admin</title></head>"
    "<body><p>The admin console's pages ({name}) are not installed; the JSON API under "
    "/admin/api/ works (docs/admin-api.md).</p>{form}</body></html>"
)
LOGIN_FORM = (
    "<form method='post' action='/admin/login'><input name='username' autocomplete='username'>"
    "<input name='password' type='password' autocomplete='current-password'>"
    f"{guard.TOKEN_INPUT}<button>Log in</button></form>"
)
# Scripts only from files of this origin (no inline script, no eval, no plug-ins, no <base>
# to point relative script URLs elsewhere), forms only to this origin, never framed
# (clickjacking); no referrer leaves the console.
CSP = (
    "script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
# The pages themselves are not cached either (the app shell changes with a release, and the
# login page holds its token).
HEADERS = {"Cache-Control": "no-store", **SECURITY_HEADERS}


def _text(name: str) -> str:
    path = STATIC_DIR / name
    if path.is_file():
        return path.read_text(encoding="utf-8")
    return MISSING.format(name=name, form=LOGIN_FORM if name == "login.html" else "")


def _page(name: str) -> web.Response:
    return web.Response(
        text=_text(name), content_type="text/html", charset="utf-8", headers=HEADERS
    )


def login_page(trust_proxy: bool) -> Callable[[web.Request], Awaitable[web.Response]]:
    """GET /admin/login: the form with this browser's login token in it."""

    async def page(request: web.Request) -> web.Response:
        text = _text("login.html")
        response = web.Response(content_type="text/html", charset="utf-8", headers=HEADERS)
        token = guard.issue_token(request, response, trust_proxy)
        response.text = text.replace(guard.TOKEN_INPUT, guard.token_input(token), 1)
        return response

    return page


async def app_page(_request: web.Request) -> web.Response:
    """Any `/admin/<page>`: the single-page app routes on the client (the auth middleware sent
    a request without a session to the login page already)."""
    return _page("index.html")


def add_routes(app: web.Application, trust_proxy: bool = False) -> None:
    app.router.add_get("/admin/login", login_page(trust_proxy))
    if STATIC_DIR.is_dir():
        app.router.add_static("/admin/static/", STATIC_DIR)
    app.router.add_get("/admin", app_page)
    app.router.add_get("/admin/", app_page)
    # Not /admin/api/... (a JSON 404 there) and not /admin/static/... (the static route).
    app.router.add_get(r"/admin/{page:(?!api/|static/)[^?]*}", app_page)
