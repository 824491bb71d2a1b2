"""The console's HTML: `static/login.html` (no session needed) and `static/index.html`, a
single-page app, for `/admin/` and every `/admin/<page>` (the pages are adminui's: this module
only serves them). Static assets under `/admin/static/` carry no data and need no session."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

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
    "<button>Log in</button></form>"
)
# Not cached (the app shell changes with a release), never framed (clickjacking), no referrer
# leaves the console.
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def _page(name: str) -> web.Response:
    path = STATIC_DIR / name
    if path.is_file():
        text = path.read_text(encoding="utf-8")
    else:
        text = MISSING.format(name=name, form=LOGIN_FORM if name == "login.html" else "")
    return web.Response(text=text, content_type="text/html", charset="utf-8", headers=HEADERS)


async def login_page(_request: web.Request) -> web.Response:
    return _page("login.html")


async def app_page(_request: web.Request) -> web.Response:
    """Any `/admin/<page>`: the single-page app routes on the client (the auth middleware sent
    a request without a session to the login page already)."""
    return _page("index.html")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/admin/login", login_page)
    if STATIC_DIR.is_dir():
        app.router.add_static("/admin/static/", STATIC_DIR)
    app.router.add_get("/admin", app_page)
    app.router.add_get("/admin/", app_page)
    # Not /admin/api/... (a JSON 404 there) and not /admin/static/... (the static route).
    app.router.add_get(r"/admin/{page:(?!api/|static/)[^?]*}", app_page)
