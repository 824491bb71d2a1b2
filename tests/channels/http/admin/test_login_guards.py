"""The holes issue 34 found in the console's login (chatfn/channels/http/admin/login.py): another
site's form cannot sign a browser in, every failed login costs one scrypt of the same size,
the pages run only script files of their own origin, and the session cookie is Secure behind
a TLS proxy the config trusts."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from typing import Any

from aiohttp import ClientSession, DummyCookieJar

from chatfn.channels.http.admin.passwords import hash_password
from tests.channels.http.admin.conftest import HASHES, admin_config

SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)


def _audit(engine: Any) -> list[tuple[str, str, Any]]:
    from sqlalchemy import select

    from chatfn.storage.models import admin_audit_table as t

    with engine.connect() as conn:
        return [(r.user, r.action, r.detail) for r in conn.execute(select(t))]


async def test_a_login_from_another_site_is_refused_and_audited(console) -> None:
    c = await console()
    port = c.channel.bound_port
    admin = await c.client()
    token = await admin.login_token()
    form = {"username": "alice", "password": "alice-secret", "csrf": token}

    async def post(headers: dict[str, str], data: dict[str, str] = form) -> tuple[int, str]:
        resp = await admin.http.post(
            f"{c.base}/admin/login", data=data, headers=headers, allow_redirects=False
        )
        return resp.status, await resp.text()

    # A browser tells where the form came from: another site, or another origin of this site
    # (a sibling subdomain or port, which could also have tossed a cookie onto ours).
    for headers, says in [
        ({"Sec-Fetch-Site": "cross-site"}, "another site"),
        ({"Sec-Fetch-Site": "same-site"}, "another site"),
        ({"Origin": "https://evil.example"}, "another origin"),
        ({"Origin": "null"}, "another origin"),  # a sandboxed frame, a data: URL
        ({"Origin": f"http://127.0.0.1:{port + 1}"}, "another origin"),
        ({"Origin": f"https://127.0.0.1:{port}"}, "another origin"),
        ({"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "cross-site"}, "another site"),
    ]:
        status, page = await post(headers)
        assert status == 403, headers
        assert "Sign-in refused" in page and says in page, headers
    assert (await admin.get("/admin/api/session"))[0] == 401
    # A browser that says neither (curl, an old browser): the form's token decides. Another
    # site can neither read this browser's token nor make it send the login cookie.
    stranger = await c.client()
    assert (await stranger.http.post(f"{c.base}/admin/login", data=form)).status == 403
    for bad in ({**form, "csrf": ""}, {k: v for k, v in form.items() if k != "csrf"}):
        status, page = await post({}, bad)
        assert status == 403 and "login token" in page
    # Refusals are audited, not counted as failed logins: another site's page cannot lock the
    # user out (five failures would). The console's own page signs in as before.
    status, _ = await post({"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"})
    assert status == 303
    assert (await admin.get("/admin/api/session"))[1]["user"] == "alice"
    entries = await c.tb.bot.storage.run(_audit, c.tb.bot.storage.engine)
    refused = [e for e in entries if e[1] == "login.refused"]
    assert len(refused) == 10 and all(user == "alice" for user, _, _ in refused)
    assert "another site" in json.loads(refused[0][2])["why"]
    assert [e[1] for e in entries].count("login.failed") == 0


async def test_a_login_behind_a_trusted_proxy_is_checked_against_the_forwarded_origin(
    console,
) -> None:
    proxied = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "admin.example.com"}
    headers = {**proxied, "Origin": "https://admin.example.com", "Sec-Fetch-Site": "same-origin"}
    for trust, expected in ((True, 303), (False, 403)):
        c = await console(config=admin_config(channels={"http": {"trust_proxy": trust}}))
        status, set_cookie, page = await _proxied_login(c.base, headers)
        assert status == expected, (trust, page)
        if not trust:  # the refusal says what to set
            assert "channels.http.trust_proxy" in page and "X-Forwarded-Host" in page


async def _proxied_login(base: str, headers: dict[str, str]) -> tuple[int, list[str], str]:
    """A login through a TLS proxy: the cookies are sent by hand (a client's cookie jar keeps
    a Secure cookie from plain http://127.0.0.1); every Set-Cookie of both answers is kept."""
    async with ClientSession(cookie_jar=DummyCookieJar()) as http:
        page = await http.get(f"{base}/admin/login", headers=headers)
        set_cookie = page.headers.getall("Set-Cookie", [])
        token = re.search(r'name="csrf" value="([^"]+)"', await page.text())
        assert token
        resp = await http.post(
            f"{base}/admin/login",
            data={"username": "alice", "password": "alice-secret", "csrf": token.group(1)},
            headers={**headers, "Cookie": f"chatfn_admin_login={token.group(1)}"},
            allow_redirects=False,
        )
        set_cookie += resp.headers.getall("Set-Cookie", [])
        return resp.status, set_cookie, await resp.text()


async def test_the_session_cookie_is_secure_behind_a_trusted_tls_proxy(console) -> None:
    https = {"X-Forwarded-Proto": "https"}
    for trust, secure in ((True, True), (False, False)):
        c = await console(config=admin_config(channels={"http": {"trust_proxy": trust}}))
        status, set_cookie, _ = await _proxied_login(c.base, https)
        assert status == 303
        session = [h for h in set_cookie if h.startswith("chatfn_admin=")]
        login = [h for h in set_cookie if h.startswith("chatfn_admin_login=")]
        assert len(session) == 1 and len(login) == 1
        for header in session + login:
            assert ("; Secure" in header) is secure, (trust, header)
            assert "HttpOnly" in header and "SameSite=Strict" in header
    # Trusted, a proxy that says http (or appends to what a client claimed: the last entry is
    # the proxy's own) leaves the cookie as it is.
    c = await console(config=admin_config(channels={"http": {"trust_proxy": True}}))
    for proto in ("http", "https, http"):
        _, set_cookie, _ = await _proxied_login(c.base, {"X-Forwarded-Proto": proto})
        assert not any("; Secure" in h for h in set_cookie), proto


def _env_config(monkeypatch: Any, alice_hash: str) -> dict[str, Any]:
    monkeypatch.setenv("CAROL_ADMIN_PASSWORD", "carol-from-env")
    users = {
        "alice": {"password_hash": alice_hash},
        "carol": {"password": "${CAROL_ADMIN_PASSWORD}"},
    }
    return admin_config(admin={"users": users})


async def test_every_failed_login_runs_one_scrypt_of_the_same_cost(console, monkeypatch) -> None:
    c = await console(config=_env_config(monkeypatch, HASHES["alice"]))
    admin = await c.client()
    costs: list[tuple[int, int, int]] = []
    real = hashlib.scrypt

    def counted(password: bytes, **kw: Any) -> bytes:
        costs.append((kw["n"], kw["r"], kw["p"]))
        return real(password, **kw)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    for user in ("alice", "carol", "nobody"):
        costs.clear()
        assert await admin.login(user, "wrong password") == 303
        assert costs == [(2**8, 8, 1)], user  # the cost of the configured hash
    costs.clear()
    assert await admin.login("carol", "carol-from-env") == 303
    assert costs == [(2**8, 8, 1)]
    assert (await admin.get("/admin/api/session"))[1]["user"] == "carol"


async def test_failed_logins_take_as_long_whoever_the_user_is(console, monkeypatch) -> None:
    # Half the real cost: one scrypt (about 15 ms on an idle machine) stands out of the noise.
    c = await console(config=_env_config(monkeypatch, hash_password("alice-secret", n=2**13)))
    admin = await c.client()
    token = await admin.login_token()
    took: dict[str, list[float]] = {"alice": [], "carol": [], "nobody": []}
    for _ in range(5):  # the limiter allows five failures per user; the paths take turns
        for user, times in took.items():
            form = {"username": user, "password": "wrong password", "csrf": token}
            start = time.perf_counter()
            resp = await admin.http.post(f"{c.base}/admin/login", data=form, allow_redirects=False)
            times.append(time.perf_counter() - start)
            assert resp.status == 303
    hashed = statistics.median(took["alice"])
    for user in ("carol", "nobody"):
        assert statistics.median(took[user]) >= hashed / 2, (user, took)


async def test_pages_run_only_script_files_of_their_own_origin(console) -> None:
    c = await console()
    anonymous = await c.client()
    admin = await c.client("alice")
    pages = [
        (anonymous, "/admin/login"),
        (anonymous, "/admin/static/login.html"),
        (anonymous, "/admin/static/index.html"),
        (admin, "/admin/"),
        (admin, "/admin/chats"),
    ]
    for client, path in pages:
        resp = await client.http.get(c.base + path, allow_redirects=False)
        assert resp.status == 200, path
        policy = resp.headers["Content-Security-Policy"]
        directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
        assert directives["script-src"] == ["'self'"], (path, policy)
        assert directives["object-src"] == ["'none'"] and directives["base-uri"] == ["'none'"]
        assert directives["frame-ancestors"] == ["'none'"]
        for attributes in SCRIPT_TAG.findall(await resp.text()):
            assert "src=" in attributes, (path, attributes)  # no inline script
    # The refusal page and the API's JSON carry the policy too.
    resp = await anonymous.http.post(f"{c.base}/admin/login", data={"username": "x"})
    assert resp.status == 403 and "script-src 'self'" in resp.headers["Content-Security-Policy"]
    resp = await admin.http.get(f"{c.base}/admin/api/session")
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
