"""The console's Models page API (issue 39): a model added, its key refused and then fixed, each
test making one real round trip to a local OpenAI-compatible server (tests/.../fake_openai.py);
the default chosen; every change written to config.yaml with its comments kept, the old file
kept as config.yaml.bak, audited by name; the bot answers through the new model without a
restart. Only an owner changes; a key is never shown; a value from ${VAR} is not editable; a
change that makes the config invalid writes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import load_settings
from tests.channels.http.admin.conftest import HASHES, Admin
from tests.channels.http.admin.fake_openai import FakeOpenAI

TOKEN = "models-token"


def config(fake: FakeOpenAI) -> str:
    return f"""\
# the operator's own comment: kept
bot:
  model: main  # the default
  timezone: UTC
models:
  main:
    provider: openai
    base_url: {fake.url}
    model: fake-1
    api_key: ${{FAKE_MODEL_KEY}}  # from the environment
channels:
  http:
    host: 127.0.0.1
    port: 0
    token: {TOKEN}
admin:
  users:
    alice:
      password_hash: "{HASHES["alice"]}"
      role: owner
    bob:
      password_hash: "{HASHES["bob"]}"
"""


class Running:
    def __init__(self, folder: Path, fake: FakeOpenAI, bot: Bot, channel: HttpChannel) -> None:
        self.file = folder / "config.yaml"
        self.fake = fake
        self.bot = bot
        self.channel = channel
        self.base = f"http://127.0.0.1:{channel.bound_port}"
        self.clients: list[Admin] = []

    async def client(self, user: str) -> Admin:
        admin = Admin(self.base)
        self.clients.append(admin)
        assert await admin.login(user) == 303
        return admin

    def written(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.file.read_text()))

    async def say(self, text: str) -> str:
        async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            body = {"chat_id": "private:ann", "sender_id": "ann", "text": text}
            resp = await http.post(f"{self.base}/v1/messages", json=body)
            assert resp.status == 200, await resp.text()
            return json.dumps(await resp.json())


@pytest_asyncio.fixture
async def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Running]:
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-good")
    fake = await FakeOpenAI().start()
    (tmp_path / "config.yaml").write_text(config(fake))
    bot = Bot(load_settings(tmp_path / "config.yaml"), load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    run = Running(tmp_path, fake, bot, channel)
    yield run
    for client in run.clients:
        await client.close()
    await channel.stop()
    await bot.aclose()
    await fake.stop()


@pytest.mark.asyncio
async def test_a_model_added_tested_made_default_and_used(running: Running) -> None:
    alice = await running.client("alice")
    fake = running.fake
    status, listing = await alice.get("/admin/api/models")
    assert status == 200 and listing["default"] == "main"
    (main,) = listing["models"]
    assert main["api_key"] == "set" and main["from_env"] == ["api_key"]

    # A new model with a wrong key: saved (the config is valid), its test says the provider's
    # refusal in one line.
    form = {
        "provider": "openai",
        "base_url": fake.url,
        "model": "fake-1",
        "api_key": "sk-wrong",
        "price": {"input": 1.5, "output": 3},
        "streaming": True,
        "fallback": ["main"],
    }
    status, saved = await alice.send("PUT", "/admin/api/models/second", form)
    assert status == 200, saved
    text = running.file.read_text()
    assert "# the operator's own comment: kept" in text and "model: main  # the default" in text
    assert "api_key: ${FAKE_MODEL_KEY}  # from the environment" in text
    second = running.written()["models"]["second"]
    assert second["api_key"] == "sk-wrong" and second["price"] == {"input": 1.5, "output": 3}
    assert (
        "second"
        not in yaml.safe_load((running.file.with_name("config.yaml.bak")).read_text())["models"]
    )
    status, tested = await alice.send("POST", "/admin/api/models/second/test")
    assert status == 200 and tested["ok"] is False
    assert "Incorrect API key" in tested["line"] and "\n" not in tested["line"]

    # The key is write-only: never in the listing. Fixed with the key alone, the rest kept.
    status, listing = await alice.get("/admin/api/models")
    assert "sk-wrong" not in json.dumps(listing)
    status, _ = await alice.send("PUT", "/admin/api/models/second", {"api_key": "sk-good"})
    assert status == 200
    assert running.written()["models"]["second"]["price"] == {"input": 1.5, "output": 3}
    status, tested = await alice.send("POST", "/admin/api/models/second/test")
    assert tested["ok"] is True and tested["line"].startswith("pong: ")

    # The default: written, and the next message goes through it.
    status, _ = await alice.send("PUT", "/admin/api/models/default", {"name": "second"})
    assert status == 200 and running.written()["bot"]["model"] == "second"
    reply = json.loads(await running.say("hello there"))["replies"][0]["text"]
    assert reply.split() == ["pong:", "hello", "there"]

    status, audit = await alice.get("/admin/api/audit")
    actions = [(e["user"], e["action"]) for e in audit["entries"]]
    for action in ("model.add", "model.save", "model.test", "model.default"):
        assert ("alice", action) in actions


@pytest.mark.asyncio
async def test_refused_changes_write_nothing(running: Running) -> None:
    alice, bob = await running.client("alice"), await running.client("bob")
    before = running.file.read_text()
    # Not an owner: may look, not change.
    assert (await bob.get("/admin/api/models"))[0] == 200
    status, body = await bob.send("PUT", "/admin/api/models/x", {"model": "m"})
    assert status == 403 and "owner" in body["error"]
    assert (await bob.send("POST", "/admin/api/models/main/test"))[0] == 403
    # Invalid as a whole config: named, nothing written.
    status, body = await alice.send(
        "PUT", "/admin/api/models/x", {"provider": "nope", "model": "m"}
    )
    assert status == 400 and "models.x.provider" in body["error"]
    status, body = await alice.send("PUT", "/admin/api/models/x", {"provider": "openai"})
    assert status == 400 and body["field"] == "model"
    # A key from the environment is changed there, not here.
    status, body = await alice.send("PUT", "/admin/api/models/main", {"api_key": "sk-other"})
    assert status == 409 and "environment" in body["error"]
    # The default cannot be removed while another model could take its place unchosen.
    await alice.send("PUT", "/admin/api/models/spare", {"model": "fake-1", "base_url": "http://x"})
    status, body = await alice.send("DELETE", "/admin/api/models/main")
    assert status == 409
    status, _ = await alice.send("DELETE", "/admin/api/models/spare")
    assert status == 200 and "spare" not in running.written()["models"]
    assert running.file.read_text() == before
