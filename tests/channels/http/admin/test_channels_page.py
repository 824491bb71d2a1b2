"""The console's Channels page API (issue 39): every installed channel with its state, a form
generated from its settings model (secrets write-only), its README; the Telegram channel set
up against the local Telegram Bot API (tests/channels/telegram/telegram_fake.py): a wrong token
saved and its test showing Telegram's refusal, the right one passing getMe; written to
config.yaml with comments kept, audited, and the page saying a restart is needed. Only an owner
changes; a secret never comes back; an unknown key is refused naming it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import load_settings
from tests.channels.http.admin.conftest import HASHES, Admin
from tests.channels.telegram.telegram_fake import FakeTelegram

pytest.importorskip("telegram", reason="the telegram extra is not installed")

CONFIG = f"""\
# channels set up from the console
bot:
  timezone: UTC  # kept
channels:
  http:
    host: 127.0.0.1
    port: 0
    token: tok
admin:
  users:
    alice:
      password_hash: "{HASHES["alice"]}"
      role: owner
    bob:
      password_hash: "{HASHES["bob"]}"
"""


class Running:
    def __init__(self, folder: Path, bot: Bot, channel: HttpChannel) -> None:
        self.file = folder / "config.yaml"
        self.bot = bot
        self.channel = channel
        self.base = f"http://127.0.0.1:{channel.bound_port}"
        self.clients: list[Admin] = []

    async def client(self, user: str) -> Admin:
        admin = Admin(self.base)
        self.clients.append(admin)
        assert await admin.login(user) == 303
        return admin


@pytest_asyncio.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    (tmp_path / "config.yaml").write_text(CONFIG)
    bot = Bot(load_settings(tmp_path / "config.yaml"), load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    run = Running(tmp_path, bot, channel)
    yield run
    for client in run.clients:
        await client.close()
    await channel.stop()
    await bot.aclose()


@pytest.mark.asyncio
async def test_telegram_set_up_and_tested_from_the_console(running: Running) -> None:
    alice, bob = await running.client("alice"), await running.client("bob")
    status, listing = await alice.get("/admin/api/channels")
    assert status == 200
    by_name = {c["name"]: c for c in listing["channels"]}
    assert {"http", "telegram", "kook"} <= set(by_name)
    assert by_name["http"]["running"]["connected"] is not False  # this process serves it
    telegram = by_name["telegram"]
    assert telegram["running"] is None and telegram["configured"] is False
    assert "BotFather" in telegram["readme"]
    kinds = {f["name"]: f["kind"] for f in telegram["fields"]}
    assert kinds["token"] == "secret" and kinds["base_url"] == "string"
    assert next(f for f in telegram["fields"] if f["name"] == "token")["value"] == "not set"

    async with FakeTelegram() as tg:
        # Not an owner: refused, nothing written.
        status, _ = await bob.send("PUT", "/admin/api/channels/telegram", {"token": tg.token})
        assert status == 403
        assert (await bob.send("POST", "/admin/api/channels/telegram/test"))[0] == 403
        status, body = await alice.send("PUT", "/admin/api/channels/telegram", {"tokn": "x"})
        assert status == 400 and "channels.telegram.tokn" in body["error"]

        form = {"token": "123456:wrong-token", "base_url": tg.base_url}
        status, saved = await alice.send("PUT", "/admin/api/channels/telegram", form)
        assert status == 200 and saved["applied"] == "restart"
        status, tested = await alice.send("POST", "/admin/api/channels/telegram/test")
        assert status == 200 and tested["ok"] is False
        assert any(
            "Unauthorized" in line["text"] or "token" in line["text"].lower()
            for line in tested["lines"]
        )

        status, _ = await alice.send("PUT", "/admin/api/channels/telegram", {"token": tg.token})
        status, tested = await alice.send("POST", "/admin/api/channels/telegram/test")
        assert tested["ok"] is True, tested
        assert any("chatfn_test_bot" in line["text"] for line in tested["lines"])
        assert any(method == "getMe" for method, _ in tg.calls)

    text = running.file.read_text()
    assert "# channels set up from the console" in text and "timezone: UTC  # kept" in text
    written = yaml.safe_load(text)["channels"]["telegram"]
    assert written == {"token": tg.token, "base_url": tg.base_url}
    status, listing = await alice.get("/admin/api/channels")
    assert tg.token not in str(listing)
    telegram = next(c for c in listing["channels"] if c["name"] == "telegram")
    assert next(f for f in telegram["fields"] if f["name"] == "token")["value"] == "set"
    status, audit = await alice.get("/admin/api/audit")
    actions = [(e["user"], e["action"]) for e in audit["entries"]]
    assert ("alice", "channel.save") in actions and ("alice", "channel.test") in actions
    assert tg.token not in str(audit)


@pytest.mark.asyncio
async def test_values_from_the_command_line_or_environment_are_shown_not_edited(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from chatfn.run import _mark_command_line

    # `chatfn run --channel http --port 8089`, as run.py records it for the console.
    console = running.bot.api_host.console
    args = argparse.Namespace(channel=["http"], host=None, port=8089)
    _mark_command_line(args, console.command_line)
    alice = await running.client("alice")
    before = running.file.read_text()
    status, listing = await alice.get("/admin/api/channels")
    http = next(c for c in listing["channels"] if c["name"] == "http")
    port = next(f for f in http["fields"] if f["name"] == "port")
    assert port["from_command_line"] == "--port 8089"
    assert http["run_from_command_line"] == "--channel http"
    host = next(f for f in http["fields"] if f["name"] == "host")
    assert host["from_command_line"] is None
    status, body = await alice.send("PUT", "/admin/api/channels/http", {"port": 9000})
    assert status == 409 and "--port 8089" in body["error"]
    assert running.file.read_text() == before
    # A ${VAR} in the file: shown as from the environment, refused here too.
    running.file.write_text(before.replace("token: tok", "token: ${HTTP_TOKEN:-tok}"))
    status, listing = await alice.get("/admin/api/channels")
    http = next(c for c in listing["channels"] if c["name"] == "http")
    assert next(f for f in http["fields"] if f["name"] == "token")["from_env"] is True
    status, body = await alice.send("PUT", "/admin/api/channels/http", {"token": "new"})
    assert status == 409 and "environment" in body["error"]
