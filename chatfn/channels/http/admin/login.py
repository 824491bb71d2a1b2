"""The guards of `POST /admin/login` (auth.py's `login` calls them).

Login CSRF: another site's auto-submitting form can post the attacker's own name and password
to the console, and the answer's session cookie is set in the victim's browser (SameSite
governs sending a cookie, not setting one); the victim then works in, and types into, the
attacker's account. So a login is refused (403, audited as `login.refused`) when

- `Sec-Fetch-Site` says `cross-site`, or `same-site` (another origin of the same site: a
  sibling subdomain, another port or scheme, which can also toss cookies onto ours), or any
  value but `same-origin` and `none`;
- `Origin` is sent and is not the request's own origin (scheme and Host header, or the
  trusted proxy's `X-Forwarded-Proto` / `X-Forwarded-Host`: chatfn/channels/http/proxy.py);
  `Origin: null` (a sandboxed frame, a data: URL) is another origin too;
- the form's `csrf` field is not the token of the `chatfn_admin_login` cookie that
  `GET /admin/login` set (double submit: another site can neither read the cookie nor send
  it, SameSite=Strict). Like every other change under /admin/, a login carries a token: a
  client without Origin and Sec-Fetch-Site (curl, an old browser) is no exception, it reads
  the token from the login page first. Scripts use the bearer token instead.

Equal cost: every login that reaches the password check runs exactly one scrypt check of the
same cost (`dummy_for`), and the password of a user from the environment is compared in
constant time (`same_secret`)."""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import secrets
from collections import Counter
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from chatfn.channels.http.admin.passwords import N, P, R, cost_of, dummy_hash
from chatfn.channels.http.proxy import is_https, own_origin, parse_origin, show
from chatfn.common.config import AdminUser

LOGIN_COOKIE = "chatfn_admin_login"
TOKEN_FIELD = "csrf"
# In login.html's form; the login page's answer puts this browser's token in its value.
TOKEN_INPUT = '<input type="hidden" name="csrf" value="">'
TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)
FETCH_SITES_ALLOWED = frozenset({"same-origin", "none"})
REFUSED = (
    "<!doctype html><meta charset='utf-8'><title>chatfn admin</title>"
    "<p>Sign-in refused: {why}.</p><p><a href='/admin/login'>Open the sign-in page</a> "
    "and sign in there.</p>"
)


# -- the login token (double submit) --------------------------------------------------------
def token_input(token: str) -> str:
    return f'<input type="hidden" name="{TOKEN_FIELD}" value="{html.escape(token)}">'


def issue_token(request: web.Request, response: web.StreamResponse, trust_proxy: bool) -> str:
    """The token for this browser's login form: the one its cookie already holds (so two open
    login pages both work), else a new one, set as the cookie on `response`."""
    token = request.cookies.get(LOGIN_COOKIE, "")
    if not TOKEN_SHAPE.match(token):
        token = secrets.token_urlsafe(32)
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        path="/admin/login",
        httponly=True,
        samesite="Strict",
        secure=is_https(request, trust_proxy),
    )
    return token


# -- refusing another site's login ----------------------------------------------------------
def refusal(request: web.Request, form: Mapping[str, Any], trust_proxy: bool) -> str | None:
    """Why this login must be refused as not coming from the console's own login page; None:
    it may go on to the password check."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() not in FETCH_SITES_ALLOWED:
        return f"the form was sent from another site (Sec-Fetch-Site: {site[:40]})"
    origin = request.headers.get("Origin")
    if origin is not None:
        mine = own_origin(request, trust_proxy)
        theirs = parse_origin(origin)
        if mine is None or theirs != mine:
            hint = (
                ""
                if trust_proxy
                else (
                    "; behind a reverse proxy, set channels.http.trust_proxy and have the proxy "
                    "send X-Forwarded-Proto and X-Forwarded-Host"
                )
            )
            return (
                f"the form was sent from another origin ({origin[:100]!r}, this console is "
                f"{show(mine)}){hint}"
            )
    given = str(form.get(TOKEN_FIELD, "")).encode(errors="replace")
    kept = request.cookies.get(LOGIN_COOKIE, "")
    if not TOKEN_SHAPE.match(kept) or not hmac.compare_digest(given, kept.encode()):
        return "the form's login token is missing or stale (open /admin/login and sign in there)"
    return None


def refused_page(why: str) -> web.Response:
    return web.Response(
        status=403,
        text=REFUSED.format(why=html.escape(why)),
        content_type="text/html",
        charset="utf-8",
        headers={"Cache-Control": "no-store"},
    )


# -- the same cost on every path ------------------------------------------------------------
def dummy_for(users: Mapping[str, AdminUser]) -> str:
    """The hash checked when there is no hash of the user's own (an unknown name, a password
    from the environment): made with the cost most configured hashes have (the costlier on a
    tie; scrypt's default without any), so it takes as long as a real user's check."""
    costs = Counter(
        cost for u in users.values() if u.password_hash and (cost := cost_of(u.password_hash))
    )
    if costs:
        n, r, p = max(costs, key=lambda c: (costs[c], c[0] * c[1] * c[2]))
        try:
            return dummy_hash(n, r, p)
        except (ValueError, MemoryError):  # a cost scrypt refuses: that hash never matches
            pass
    return dummy_hash(N, R, P)


def same_secret(given: str, secret: str) -> bool:
    """Constant time whatever the two lengths: digests of equal size are compared."""
    return hmac.compare_digest(
        hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest(),
        hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest(),
    )
