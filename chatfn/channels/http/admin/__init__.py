"""The web admin console on the HTTP channel's port (issue 23; docs/admin-api.md): pages
under `/admin/`, a JSON API under `/admin/api/`. With no `admin.users` configured it runs in
first-run mode: only the setup page (setup.py) answers, for the one-time link the bot prints.

It is a part of the bot's web server, not of the HTTP API channel: `serve` mounts it on the
main listener (chatfn/runtime/web_parts.py) whenever that listens, with the HTTP section's
`token` (a script's bearer) and `trust_proxy`, where the documentation keeps them.

auth       sessions, CSRF, bearer token, the login and logout routes
login      the login's guards: another site's form refused, one scrypt cost on every path
limiter    failed logins per user and address
passwords  scrypt hashes (`chatfn admin passwd USER`)
pages      login.html and index.html (static/, the pages themselves are adminui's)
api        the JSON endpoints, each a thin call into `host.console` (chatfn/runtime/console)
logs       the live log tail over Server-Sent Events
setup      the first run: the one-time link's page that makes the first owner user
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from loguru import logger

from chatfn.channels.http.settings import HttpSettings
from chatfn.runtime.channel_host import ApiHost, section_of

if TYPE_CHECKING:
    from chatfn.channels.http.admin.auth import AdminAuth


def serve(api: ApiHost) -> None:
    """The web part: the console on `api.web`'s main listener, its background work running
    while the server does, and its first run's link printed once the port is known."""
    cfg = section_of(api.settings, "http", HttpSettings)
    server = api.web
    auth = mount(server.main.app, api, cfg.token, cfg.trust_proxy)
    console = api.console

    async def start() -> None:
        console.start()

    server.lifespan(start, console.stop)
    server.when_listening(lambda: auth.setup.announce(server.main.bound_port))


def mount(
    app: web.Application, host: ApiHost, token: str | None, trust_proxy: bool = False
) -> AdminAuth:
    """Add the console's routes and its auth middleware to the main listener's app (with no
    admin user configured, everything but the first run's setup page is refused until the
    owner is made). `trust_proxy`: channels.http.trust_proxy (chatfn/channels/http/proxy.py)."""
    users = host.settings.admin.users
    for name, user in users.items():
        if user.password is not None:
            logger.warning(
                "admin.users.{}.password is a plain password (from the environment): use "
                "password_hash, printed by `chatfn admin passwd {}`",
                name,
                name,
            )
    # Loaded here, not with the HTTP channel (about 1 MB; bench/README, peak RSS).
    from chatfn.channels.http.admin import api, pages, setup
    from chatfn.channels.http.admin.auth import AdminAuth

    auth = AdminAuth(host.console, token, trust_proxy)
    app.middlewares.append(auth.middleware)
    app.router.add_post("/admin/login", auth.login)
    app.router.add_post("/admin/logout", auth.logout)
    api.add_routes(app, host)
    auth.setup = setup.Setup(auth)
    setup.add_routes(app, auth.setup)
    pages.add_routes(app, trust_proxy)
    return auth
