"""Access to the console: every /admin/ path refused without a session, login with a hashed
or environment password, the session cookie's flags, CSRF on changes, the failed-login rate
limit, session expiry and logout, the bearer token for scripts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import ClientSession
from sqlalchemy import update

from chatfn.runtime.settings import ConfigError, parse_settings
from chatfn.storage.models import admin_sessions_table
from tests.channels.http.admin.conftest import TOKEN, admin_config

# Every route of docs/admin-api.md (a placeholder id where one is needed).
API = [
    ("GET", "/admin/api/session"),
    ("GET", "/admin/api/overview?days=7"),
    ("GET", "/admin/api/chats"),
    ("GET", "/admin/api/chats/http/c1"),
    ("PATCH", "/admin/api/chats/http/c1/settings"),
    ("POST", "/admin/api/chats/http/c1/reset"),
    ("GET", "/admin/api/chats/http/c1/history"),
    ("GET", "/admin/api/turns/http/c1/m1"),
    ("GET", "/admin/api/usage?group_by=model&days=7"),
    ("GET", "/admin/api/usage?format=csv"),
    ("GET", "/admin/api/reminders"),
    ("DELETE", "/admin/api/reminders/r1"),
    ("GET", "/admin/api/delivery"),
    ("POST", "/admin/api/delivery/1/retry"),
    ("GET", "/admin/api/plugins"),
    ("GET", "/admin/api/logs"),
    ("POST", "/admin/api/check"),
    ("GET", "/admin/api/audit"),
    ("GET", "/admin/api/nothing-here"),
    ("POST", "/admin/logout"),
]
PAGES = ["/admin", "/admin/", "/admin/chats", "/admin/usage/model", "/admin/trace/x/y/z"]


async def test_every_admin_path_without_a_session_is_refused(console) -> None:
    c = await console()
    async with ClientSession() as anonymous:
        for method, path in API:
            resp = await anonymous.request(method, c.base + path, allow_redirects=False)
            assert resp.status == 401, (method, path)
            assert "error" in await resp.json()
        for path in PAGES:
            resp = await anonymous.get(c.base + path, allow_redirects=False)
            assert (resp.status, resp.headers["Location"]) == (303, "/admin/login"), path
        # A forged or stale cookie is no session; a wrong bearer token is no token.
        for headers in ({"Cookie": "chatfn_admin=forged"}, {"Authorization": "Bearer nope"}):
            resp = await anonymous.get(c.base + "/admin/api/chats", headers=headers)
            assert resp.status == 401
        # Open: the login page and static assets (no data in them).
        assert (await anonymous.get(c.base + "/admin/login")).status == 200


async def test_login_sets_a_strict_httponly_cookie_and_csrf_guards_changes(console) -> None:
    c = await console()
    admin = await c.client()
    assert await admin.login("alice", "wrong") == 303
    status, _ = await admin.get("/admin/api/session")
    assert status == 401
    form = {"username": "alice", "password": "alice-secret", "csrf": await admin.login_token()}
    resp = await admin.http.post(f"{c.base}/admin/login", data=form, allow_redirects=False)
    assert (resp.status, resp.headers["Location"]) == (303, "/admin/")
    cookie = resp.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/admin" in cookie
    status, me = await admin.get("/admin/api/session")
    assert status == 200
    assert me["user"] == "alice" and me["scoped"] is False and me["chats"] is None
    assert me["language"] == "en" and me["bearer"] is False and len(me["csrf"]) >= 32
    admin.csrf = me["csrf"]
    status, page = await admin.get("/admin/chats")
    assert status == 200 and "<html" in page.lower()
    # A change without the CSRF token, or with another session's, is refused.
    status, body = await admin.send("POST", "/admin/api/chats/http/c1/reset", csrf=False)
    assert status == 403 and "CSRF" in body["error"]
    other = await c.client("alice")
    assert other.csrf != admin.csrf
    admin_csrf, admin.csrf = admin.csrf, other.csrf
    assert (await admin.send("POST", "/admin/api/chats/http/c1/reset"))[0] == 403
    admin.csrf = admin_csrf
    # Logout needs the token too, then ends the session on the server.
    assert (await admin.send("POST", "/admin/logout", csrf=False))[0] == 403
    status, _ = await admin.send("POST", "/admin/logout")
    assert status == 303
    assert (await admin.get("/admin/api/session"))[0] == 401
    assert (await other.get("/admin/api/session"))[0] == 200


async def test_failed_logins_are_limited_per_user_and_address(console) -> None:
    c = await console()
    admin = await c.client()
    for _ in range(5):
        assert await admin.login("alice", "guess") == 303
    # The sixth try is refused before the password is checked, the right one too.
    assert await admin.login("alice") == 429
    # Another user from the same address is not locked out by alice's failures.
    assert await admin.login("bob") == 303
    failed = await c.tb.bot.storage.run(_audit_actions, c.tb.bot.storage.engine)
    assert failed.count("login.failed") == 5 and "login" in failed


def _audit_actions(engine) -> list[str]:
    from sqlalchemy import select

    from chatfn.storage.models import admin_audit_table as t

    with engine.connect() as conn:
        return [r.action for r in conn.execute(select(t.c.action))]


def _expire_all(engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(admin_sessions_table).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )


async def test_a_session_expires(console) -> None:
    c = await console(config=admin_config(admin={**admin_config()["admin"], "session_hours": 2}))
    admin = await c.client("alice")
    resp = await admin.http.get(f"{c.base}/admin/api/session")
    assert resp.status == 200
    expires = datetime.fromisoformat((await resp.json())["expires_at"])
    left = expires - datetime.now(UTC)
    assert timedelta(hours=1, minutes=59) < left <= timedelta(hours=2)
    storage = c.tb.bot.storage
    await storage.run(_expire_all, storage.engine)
    assert (await admin.get("/admin/api/session"))[0] == 401
    assert (await admin.get("/admin/"))[0] == 303


async def test_bearer_token_is_an_unscoped_user_without_csrf(console) -> None:
    c = await console()
    async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as script:
        resp = await script.get(f"{c.base}/admin/api/session")
        me = await resp.json()
        assert resp.status == 200 and me["user"] == "bearer" and me["bearer"] is True
        assert me["csrf"] is None and me["scoped"] is False
        resp = await script.post(f"{c.base}/admin/api/chats/http/none/reset")
        assert resp.status == 404  # past auth and CSRF: the chat does not exist


async def test_a_user_removed_from_the_config_loses_the_session(console) -> None:
    c = await console()
    admin = await c.client("bob")
    del c.tb.bot.settings.admin.users["bob"]
    assert (await admin.get("/admin/api/session"))[0] == 401


def test_plain_password_only_from_the_environment(monkeypatch, tmp_path) -> None:
    users = {"bob": {"password": "hunter22"}}
    with pytest.raises(ConfigError, match=r"admin.users.bob.password: only from the environment"):
        parse_settings({"admin": {"users": users}}, base_dir=tmp_path)
    monkeypatch.setenv("BOB_ADMIN_PASSWORD", "from-env-123")
    users = {"bob": {"password": "${BOB_ADMIN_PASSWORD}", "chats": ["telegram:-100*"]}}
    settings = parse_settings({"admin": {"users": users}}, base_dir=tmp_path)
    assert settings.admin.users["bob"].password.get_secret_value() == "from-env-123"
    assert settings.admin.session_hours == 12
    for bad, key in (
        ({"alice": {}}, "admin.users.alice"),
        ({"alice": {"password_hash": "md5$abc"}}, "admin.users.alice.password_hash"),
    ):
        with pytest.raises(ConfigError, match=key):
            parse_settings({"admin": {"users": bad}}, base_dir=tmp_path)


async def test_environment_password_logs_in_with_a_warning(console, monkeypatch) -> None:
    from loguru import logger

    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    monkeypatch.setenv("CAROL_ADMIN_PASSWORD", "carol-from-env")
    try:
        c = await console(
            config=admin_config(admin={"users": {"carol": {"password": "${CAROL_ADMIN_PASSWORD}"}}})
        )
    finally:
        logger.remove(sink)
    assert any("admin.users.carol.password is a plain password" in line for line in lines)
    admin = await c.client()
    assert await admin.login("carol", "carol-from-env") == 303
    assert (await admin.get("/admin/api/session"))[1]["user"] == "carol"
