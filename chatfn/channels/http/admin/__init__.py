"""The web admin console on the HTTP channel's port (issue 23; docs/admin-api.md): pages
under `/admin/`, a JSON API under `/admin/api/`, served when `admin.users` is configured.

auth       sessions, CSRF, bearer token, the login and logout routes
login      the login's guards: another site's form refused, one scrypt cost on every path
limiter    failed logins per user and address
passwords  scrypt hashes (`chatfn admin passwd USER`)
pages      login.html and index.html (static/, the pages themselves are adminui's)
api        the JSON endpoints, each a thin call into `host.console` (chatfn/runtime/console)
logs       the live log tail over Server-Sent Events
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from loguru import logger

from chatfn.runtime.channel_host import ApiHost

if TYPE_CHECKING:
    from chatfn.channels.http.admin.auth import AdminAuth


def mount(
    app: web.Application, host: ApiHost, token: str | None, trust_proxy: bool = False
) -> AdminAuth | None:
    """Add the console's routes and its auth middleware to the HTTP channel's app; None (and
    nothing added) when no admin user is configured. `trust_proxy`: channels.http.trust_proxy
    (chatfn/channels/http/proxy.py)."""
    users = host.settings.admin.users
    if not users:
        return None
    for name, user in users.items():
        if user.password is not None:
            logger.warning(
                "admin.users.{}.password is a plain password (from the environment): use "
                "password_hash, printed by `chatfn admin passwd {}`",
                name,
                name,
            )
    # Loaded here, not with the HTTP channel: a bot without admin users never holds the
    # console's modules (about 1 MB; bench/README, peak RSS).
    from chatfn.channels.http.admin import api, pages
    from chatfn.channels.http.admin.auth import AdminAuth

    auth = AdminAuth(host.console, token, trust_proxy)
    app.middlewares.append(auth.middleware)
    app.router.add_post("/admin/login", auth.login)
    app.router.add_post("/admin/logout", auth.logout)
    api.add_routes(app, host)
    pages.add_routes(app, trust_proxy)
    return auth
