"""The console's first run (issue 39): with no `admin.users`, the console serves only the setup
page; the one-time link the bot prints (and `chatfn check` prints) makes the first owner, written
to config.yaml with its comments kept; the link then no longer works, and neither does an
expired one."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import ClientSession, CookieJar

from chatfn.channels.http.channel import HttpChannel
from chatfn.check import run_checks
from chatfn.runtime.bot import Bot
from chatfn.runtime.console import setup as first_run
from chatfn.runtime.settings import load_settings
from providers.scripted import ScriptedModel

CONFIG = """\
# my bot's config: this comment must stay
bot:
  model: main  # the default model
  timezone: UTC
models:
  main:
    provider: openai
    model: main
    api_key: k
channels:
  http:
    host: 127.0.0.1
    port: 0
    token: tok
"""


class Running:
    def __init__(self, folder: Path, bot: Bot, channel: HttpChannel) -> None:
        self.folder = folder
        self.bot = bot
        self.channel = channel
        self.base = f"http://127.0.0.1:{channel.bound_port}"
        self.http = ClientSession(cookie_jar=CookieJar(unsafe=True))

    def token(self) -> str:
        kept = json.loads((self.folder / first_run.FILE).read_text())
        return str(kept["token"])

    async def get(self, path: str) -> tuple[int, str]:
        resp = await self.http.get(self.base + path, allow_redirects=False)
        return resp.status, await resp.text()

    async def create(self, token: str, name: str, password: str, again: str | None = None) -> Any:
        form = {"token": token, "username": name, "password": password, "password2": again}
        form["password2"] = password if again is None else again
        return await self.http.post(self.base + "/admin/setup", data=form, allow_redirects=False)


@pytest_asyncio.fixture
async def fresh(tmp_path: Path) -> AsyncIterator[Running]:
    (tmp_path / "config.yaml").write_text(CONFIG)
    settings = load_settings(tmp_path / "config.yaml")
    bot = Bot(settings, model=ScriptedModel([], name="main"), load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    running = Running(tmp_path, bot, channel)
    yield running
    await running.http.close()
    await channel.stop()
    await bot.aclose()


@pytest.mark.asyncio
async def test_first_run_link_makes_the_owner_once(fresh: Running) -> None:
    # Nothing but the setup page answers while no user exists: not the pages, not the API,
    # not the login, not the bearer token.
    for path in ("/admin/", "/admin/chats", "/admin/login", "/admin/api/session"):
        status, _ = await fresh.get(path)
        assert status == 403, path
    resp = await fresh.http.get(
        fresh.base + "/admin/api/overview", headers={"Authorization": "Bearer tok"}
    )
    assert resp.status == 403
    assert (await fresh.get("/admin/setup?token=wrong"))[0] == 403
    assert (await fresh.get("/admin/setup"))[0] == 403

    token = fresh.token()
    status, page = await fresh.get(f"/admin/setup?token={token}")
    assert status == 200 and f'name="token" value="{token}"' in page

    # Refused forms send the browser back with the reason; nothing is written.
    resp = await fresh.create(token, "root", "short")
    assert resp.status == 303 and resp.headers["Location"].endswith("error=short")
    resp = await fresh.create(token, "root", "long-enough-1", "long-enough-2")
    assert resp.headers["Location"].endswith("error=differ")
    resp = await fresh.create(token, "bad name!", "long-enough-1")
    assert resp.headers["Location"].endswith("error=name")
    assert "admin" not in yaml.safe_load((fresh.folder / "config.yaml").read_text())

    resp = await fresh.create(token, "root", "long-enough-1")
    assert resp.status == 303 and resp.headers["Location"] == "/admin/"
    # Signed in at once, as the owner.
    session = await (await fresh.http.get(fresh.base + "/admin/api/session")).json()
    assert session["user"] == "root"

    text = (fresh.folder / "config.yaml").read_text()
    assert "# my bot's config: this comment must stay" in text
    assert "model: main  # the default model" in text
    written = yaml.safe_load(text)["admin"]["users"]["root"]
    assert written["role"] == "owner" and written["password_hash"].startswith("scrypt$")
    assert (fresh.folder / "config.yaml.bak").read_text() == CONFIG
    assert load_settings(fresh.folder / "config.yaml").admin.users["root"].role == "owner"

    # The link is spent: a second owner cannot be made with it.
    assert (await fresh.get(f"/admin/setup?token={token}"))[0] == 403
    resp = await fresh.create(token, "eve", "long-enough-1")
    assert resp.status == 403
    assert "eve" not in yaml.safe_load((fresh.folder / "config.yaml").read_text())["admin"]["users"]
    assert not (fresh.folder / first_run.FILE).exists()

    audit = await (await fresh.http.get(fresh.base + "/admin/api/audit")).json()
    assert "setup.owner" in [e["action"] for e in audit["entries"]]


@pytest.mark.asyncio
async def test_an_expired_link_is_refused(fresh: Running) -> None:
    token = fresh.token()
    kept = fresh.folder / first_run.FILE
    past = datetime.now(UTC) - timedelta(seconds=1)
    kept.write_text(json.dumps({"token": token, "expires_at": past.isoformat()}))
    assert (await fresh.get(f"/admin/setup?token={token}"))[0] == 403
    assert (await fresh.create(token, "root", "long-enough-1")).status == 403
    # A new link is made when the old one has expired.
    new = first_run.link(fresh.bot.settings, fresh.base)
    assert token not in new
    assert (await fresh.get(new.removeprefix(fresh.base)))[0] == 200


def test_chatfn_check_prints_the_same_link(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    report = run_checks(str(tmp_path / "config.yaml"), online=False)
    line = next(c for c in report.checks if c.name == "console")
    found = re.search(r"/admin/setup\?token=([\w-]+)", line.detail)
    assert found and line.status == "warn"
    settings = load_settings(tmp_path / "config.yaml")
    assert first_run.token(settings)[0] == found.group(1)  # the running bot prints this one
    assert first_run.valid(settings, found.group(1))
