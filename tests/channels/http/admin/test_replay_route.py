"""The console's replay of one chat (issue 40.5): `POST /admin/api/chats/{platform}/{chat_id}/
replay` as an owner answers the report's JSON for that chat alone (a model on a local
OpenAI-compatible server, the recorded function result fed back, nothing sent), audited;
anyone else is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from providers.scripted import ScriptedModel, call, say
from tests.channels.http.admin.conftest import HASHES, admin_config
from tests.fakes.choosing_openai import ChoosingOpenAI

# What the model was told of the recorded roll (its audit row's detail).
ROLLED = "Sent to the user: rolled a d20: 20"


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[ChoosingOpenAI]:
    server = await ChoosingOpenAI({"fake-a": ("roll", {"sides": 6}), "fake-b": None}).start()
    yield server
    await server.stop()


async def test_owner_replays_one_chat(console, fake: ChoosingOpenAI) -> None:
    config = admin_config()
    config["models"].update(
        {
            name: {"provider": "openai", "model": name, "base_url": fake.url, "api_key": "k"}
            for name in ("fake-a", "fake-b")
        }
    )
    config["admin"]["users"]["alice"] = {"password_hash": HASHES["alice"], "role": "owner"}
    main = ScriptedModel([call("roll", sides=20), say("hello ann")], name="main")
    c = await console(model=main, config=config)
    group = {"is_group": True, "at_bot": True}
    await c.chat("team-a", "roll a d20", sender="ann", **group)
    await c.chat("team-b", "hi", sender="ann", **group)
    owner = await c.client("alice")
    path = "/admin/api/chats/http/team-a/replay"
    history = (await owner.get("/admin/api/chats/http/team-a/history"))[1]["messages"]

    status, report = await owner.send("POST", path, {"model": "fake-a", "limit": 3})
    assert status == 200, report
    assert report["replay"]["chats"] == "http:team-a" and report["replay"]["against"] == "recorded"
    [turn] = report["turns"]  # team-b is another chat
    assert turn["message"]["text"] == "roll a d20"
    tried, then = turn["model"], turn["against"]
    assert then["tools"] == ["roll"] and then["calls"][0]["result"] == ROLLED
    # roll has effects: the model gets the recorded result, nothing rolls again.
    assert tried["calls"][0]["how"] == "recorded"
    assert tried["calls"][0]["arguments"] == {"sides": 6}
    assert tried["calls"][0]["result"] == ROLLED
    # roll answered the chat itself then and ended the turn: so it does here, no second round.
    assert tried["answer"] == then["answer"] == "rolled a d20: 20"
    assert tried["rounds"] == 1
    assert turn["differs"] == ["arguments"]
    assert report["summary"]["turns"] == 1 and report["summary"]["by_aspect"]["arguments"] == 1

    status, report = await owner.send(
        "POST", path, {"model": "fake-b", "against": "fake-a", "limit": 1}
    )
    assert status == 200 and report["turns"][0]["differs"][0] == "tools"
    assert report["turns"][0]["model"]["tools"] == []

    # Nothing reached the chat.
    assert (await owner.get("/admin/api/chats/http/team-a/history"))[1]["messages"] == history
    audit = (await owner.get("/admin/api/audit?chat=http:team-a"))[1]["entries"]
    assert [e["action"] for e in audit].count("replay") == 2

    assert (await owner.send("POST", path, {"model": "nope"}))[0] == 400
    assert (await owner.send("POST", path, {"model": "fake-a", "limit": 99}))[0] == 400
    assert (await owner.send("POST", path, {"model": "fake-a"}, csrf=False))[0] == 403
    scoped = await c.client("bob")  # an admin of team-* chats, not an owner
    status, body = await scoped.send(
        "POST", "/admin/api/chats/http/team-b/replay", {"model": "fake-a"}
    )
    assert status == 403


async def test_admins_who_are_not_owners_may_not_replay(console) -> None:
    c = await console()
    admin = await c.client("alice")  # unscoped, role admin
    status, body = await admin.send(
        "POST", "/admin/api/chats/http/team-a/replay", {"model": "main"}
    )
    assert status == 403 and "owner" in body["error"]
