"""The weixin login from the admin console (issue 42): an owner starts it on the Channels
page's API, gets the QR code as SVG with its link, the (fake) phone scans and confirms, the
status says confirmed and the token is in the database, as `chatfn login weixin` keeps it;
a non-owner is refused; codes that keep expiring end as expired."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import load_settings
from chatfn.storage import channel_state
from tests.channels.http.admin.conftest import HASHES, Admin
from tests.channels.weixin.weixin_fake import FakeIlink
from tests.kit.until import until

pytest.importorskip("qrcode", reason="the weixin extra is not installed")


class Running:
    def __init__(self, bot: Bot, channel: HttpChannel) -> None:
        self.bot = bot
        self.base = f"http://127.0.0.1:{channel.bound_port}"
        self.clients: list[Admin] = []

    async def client(self, user: str) -> Admin:
        admin = Admin(self.base)
        self.clients.append(admin)
        assert await admin.login(user) == 303
        return admin


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeIlink]:
    async with FakeIlink(hold=0.1) as ilink:
        yield ilink


@pytest_asyncio.fixture
async def running(tmp_path: Path, fake: FakeIlink) -> AsyncIterator[Running]:
    config = {
        "channels": {
            "http": {"host": "127.0.0.1", "port": 0, "token": "tok"},
            "weixin": {"base_url": fake.api_base, "cdn_base_url": fake.cdn_base},
        },
        "admin": {
            "users": {
                "alice": {"password_hash": HASHES["alice"], "role": "owner"},
                "bob": {"password_hash": HASHES["bob"]},
            }
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    bot = Bot(load_settings(tmp_path / "config.yaml"), load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    run = Running(bot, channel)
    yield run
    for client in run.clients:
        await client.close()
    await channel.stop()
    await bot.aclose()


URL = "/admin/api/channels/weixin/login"


@pytest.mark.asyncio
async def test_owner_logs_weixin_in_from_the_console(running: Running, fake: FakeIlink) -> None:
    alice, bob = await running.client("alice"), await running.client("bob")
    assert (await bob.send("POST", URL))[0] == 403
    assert fake.qr_requests == 0  # refused before any QR code was asked for

    status, started = await alice.send("POST", URL)
    assert status == 200, started
    assert started["status"] == "wait" and started["svg"].startswith("<svg")
    code = fake.newest_code()
    assert code is not None and started["link"]
    assert (await bob.get(URL))[0] == 403

    await fake.scan(code.code)
    await until(lambda: fake.answered.count("scaned") > 0)
    await fake.confirm(code.code)

    async def confirmed() -> bool:
        return (await alice.get(URL))[1]["status"] == "confirmed"

    await until(confirmed)
    kept = channel_state.load(running.bot.storage.engine, "weixin", "login")
    assert kept is not None and json.loads(kept)["token"] == fake.token


@pytest.mark.asyncio
async def test_codes_that_expire_report_expired(running: Running, fake: FakeIlink) -> None:
    alice = await running.client("alice")
    status, started = await alice.send("POST", URL)
    assert status == 200 and started["status"] == "wait"
    for n in range(1, 4):
        await until(lambda n=n: len(fake.codes) >= n)
        newest = fake.newest_code()
        assert newest is not None
        await fake.expire(newest.code)

    async def expired() -> bool:
        return (await alice.get(URL))[1]["status"] == "expired"

    await until(expired)
    assert channel_state.load(running.bot.storage.engine, "weixin", "login") is None
