"""A user with `chats:` patterns (bob: `http:team-*`) sees and changes only matching chats:
every list is filtered, every other chat's route answers 404 as if it did not exist, and the
bot-wide pages (plugins, config check) are refused."""

from __future__ import annotations

from providers.scripted import say
from tests.channels.http.admin.test_endpoints import seed


async def test_a_scoped_user_neither_sees_nor_changes_other_chats(console) -> None:
    c, main, _cheap = await seed(console)
    bob = await c.client("bob")
    status, me = await bob.get("/admin/api/session")
    assert me["scoped"] is True and me["chats"] == ["http:team-*"]

    chats = (await bob.get("/admin/api/chats"))[1]
    assert sorted(x["chat_id"] for x in chats["chats"]) == ["team-a", "team-b"]
    assert chats["total"] == 2
    ov = (await bob.get("/admin/api/overview?days=1"))[1]
    assert ov["totals"]["messages_in"] == 2 and ov["totals"]["model_calls"] == 2
    assert ov["health"] is None  # the bot's own state is for unscoped users
    usage = (await bob.get("/admin/api/usage?group_by=chat&days=1"))[1]
    assert {g["key"] for g in usage["groups"]} == {"http:team-a", "http:team-b"}
    assert {u["key"] for u in usage["top_users"]} == {"http:ann", "http:dan"}

    # ops is carl's private chat: to bob it does not exist, read or write.
    ops_page = (await (await c.client("alice")).get("/admin/api/chats/http/ops/history"))[1]
    carl = ops_page["messages"][0]["message_id"]
    for method, path, body in (
        ("GET", "/admin/api/chats/http/ops", None),
        ("GET", "/admin/api/chats/http/ops/history", None),
        ("GET", f"/admin/api/turns/http/ops/{carl}", None),
        ("PATCH", "/admin/api/chats/http/ops/settings", {"model": "cheap"}),
        ("POST", "/admin/api/chats/http/ops/reset", None),
    ):
        status, answer = await bob.send(method, path, body)
        assert status == 404, (method, path)
        assert answer["error"].startswith("no ")
    overrides = await c.tb.bot.storage.run(c.tb.bot.storage.chat_state.overrides, "http", "ops")
    assert overrides == {}
    assert (await bob.get("/admin/api/plugins"))[0] == 403
    assert (await bob.send("POST", "/admin/api/check"))[0] == 403

    # His own chats he changes, and his audit shows only them.
    status, detail = await bob.send(
        "PATCH", "/admin/api/chats/http/team-b/settings", {"respond_in_groups": "always"}
    )
    assert status == 200 and detail["settings"]["respond_in_groups"]["value"] == "always"
    alice = await c.client("alice")
    await alice.send("PATCH", "/admin/api/chats/http/ops/settings", {"language": "zh"})
    entries = (await bob.get("/admin/api/audit"))[1]["entries"]
    assert [(e["user"], e["chat_id"]) for e in entries] == [("bob", "team-b")]
    # respond_in_groups: always, set from the console: the group's next message is answered
    # without a mention.
    main.add(say("heard you"))
    reply = await c.chat("team-b", "no mention", sender="dan", is_group=True)
    assert [r["text"] for r in reply["replies"]] == ["heard you"]
