"""Each console endpoint's data from a database the bot really wrote (messages through the HTTP
channel, a scripted model with prices, a function call), the PATCH that changes the model the
chat's next message uses, overrides of a chat's limits, and the audit of every change."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

from providers.scripted import ScriptedModel, call, say
from tests.channels.http.admin.conftest import Console


async def seed(make) -> tuple[Console, ScriptedModel, ScriptedModel]:
    main = ScriptedModel([call("roll", sides=20), say("hi carl"), say("hey dan")], name="main")
    cheap = ScriptedModel([say("from cheap")], name="cheap", repeat_last=True)
    c = await make(model=main, models={"cheap": cheap})
    group = {"is_group": True, "at_bot": True}
    await c.chat("team-a", "roll a d20", sender="ann", **group)
    await c.chat("ops", "hello", sender="carl")
    await c.chat("team-b", "hey", sender="dan", **group)
    await c.tb.bot.outbox.flush_marks()  # the replies' delivery marks, written now
    return c, main, cheap


async def test_overview_chats_history_trace_and_usage(console) -> None:
    c, _main, _cheap = await seed(console)
    admin = await c.client("alice")

    status, ov = await admin.get("/admin/api/overview?days=1")
    assert status == 200 and ov["bucket"] == "hour" and len(ov["series"]) == 24
    t = ov["totals"]
    assert (t["messages_in"], t["messages_out"], t["model_calls"], t["tool_calls"]) == (3, 3, 3, 1)
    assert (t["model_errors"], t["error_rate"], t["tokens"], t["active_chats"]) == (0, 0.0, 45, 3)
    assert abs(t["cost"] - 0.06) < 1e-9 and t["turns"] == 3
    assert t["latency_p50_ms"] is not None and t["latency_p95_ms"] >= t["latency_p50_ms"]
    assert sum(b["messages_in"] for b in ov["series"]) == 3
    health = ov["health"]
    assert health["role"] == "single" and health["channels"] == [
        {"name": "http", "connected": True, "detail": ""}
    ]
    assert health["outbox"]["pending"] == 0 and health["workers"] == []
    assert "event_loop_lag_ms" in health and health["mcp_servers"] == []
    # How the page draws that list comes with the session: the MCP built-in's view, its words.
    [panel] = (await admin.get("/admin/api/session"))[1]["panels"]
    assert (panel["view"], panel["key"], panel["title"]) == ("mcp", "mcp_servers", "mcp.servers")
    assert panel["texts"]["zh"]["mcp.servers"] == "MCP 服务器"
    assert (await admin.get("/admin/api/overview?days=0"))[0] == 400
    status, week = await admin.get("/admin/api/overview?days=7")
    assert week["bucket"] == "day" and len(week["series"]) in (7, 8)

    status, chats = await admin.get("/admin/api/chats")
    assert chats["total"] == 3 and chats["platforms"] == ["http"]
    by_id = {x["chat_id"]: x for x in chats["chats"]}
    assert by_id["team-a"]["kind"] == "group" and by_id["ops"]["kind"] == "private"
    assert by_id["ops"]["name"] == "carl" and by_id["team-a"]["model"] == "main"
    assert by_id["team-a"]["model_calls_7d"] == 1 and by_id["team-a"]["messages"] == 2
    assert [
        x["chat_id"] for x in (await admin.get("/admin/api/chats?kind=private"))[1]["chats"]
    ] == ["ops"]
    assert (await admin.get("/admin/api/chats?q=TEAM"))[1]["total"] == 2
    assert (await admin.get("/admin/api/chats?platform=onebot"))[1]["total"] == 0
    assert (await admin.get("/admin/api/chats?active_days=1"))[1]["total"] == 3
    assert (await admin.get("/admin/api/chats?kind=channel"))[0] == 400

    status, detail = await admin.get("/admin/api/chats/http/team-a")
    s = detail["settings"]
    assert s["model"] == {"value": "main", "source": "bot.model", "override": None}
    assert s["respond_in_groups"]["value"] == "at" and s["language"]["value"] == "en"
    assert s["limits"]["value"]["per_chat"]["messages_per_minute"] is None
    assert (
        detail["choices"]["models"] == ["main", "cheap"]
        and "roll" in detail["choices"]["functions"]
    )
    assert detail["today"]["model_calls"] == 1 and abs(detail["today"]["cost"] - 0.02) < 1e-9

    status, page = await admin.get("/admin/api/chats/http/team-a/history")
    first, reply = page["messages"]
    assert (first["role"], first["text"], reply["role"]) == ("user", "roll a d20", "assistant")
    assert reply["text"] == "rolled a d20: 20" and first["trace"] is True
    [roll] = first["tool_calls"]
    assert (roll["function"], roll["arguments"], roll["outcome"]) == ("roll", {"sides": 20}, "ok")
    assert page["next_before"] is None
    older = await admin.get("/admin/api/chats/http/team-a/history?limit=1")
    assert older[1]["next_before"] == reply["id"]

    status, trace = await admin.get(f"/admin/api/turns/http/team-a/{first['message_id']}")
    assert status == 200 and trace["message"]["text"] == "roll a d20"
    [req] = trace["model_requests"]
    assert (req["round"], req["model"], req["finish_reason"], req["outcome"]) == (
        1,
        "main",
        "tool_calls",
        "ok",
    )
    assert (req["prompt_tokens"], req["completion_tokens"]) == (10, 5)
    assert abs(req["cost"] - 0.02) < 1e-9
    assert [t["function"] for t in trace["tool_calls"]] == ["roll"]
    [sent] = trace["deliveries"]
    assert sent["text"] == "rolled a d20: 20" and sent["state"] in ("delivered", "pending")
    assert trace["limits"] == [] and trace["duration_ms"] >= 0
    assert (await admin.get("/admin/api/turns/http/team-a/nope"))[0] == 404

    status, usage = await admin.get("/admin/api/usage?group_by=model&days=1")
    [group] = usage["groups"]
    assert (group["key"], group["requests"], group["tokens"]) == ("main", 3, 45)
    assert abs(usage["totals"]["cost"] - 0.06) < 1e-9 and "rows" not in usage
    assert {(u["key"], u["label"]) for u in usage["top_users"]} == {
        ("http:ann", "ann"),
        ("http:carl", "carl"),
        ("http:dan", "dan"),
    }
    assert sum(b["tokens"]["main"] for b in usage["series"]) == 45
    status, by_chat = await admin.get("/admin/api/usage?group_by=chat&days=1")
    assert {g["key"] for g in by_chat["groups"]} == {"http:team-a", "http:ops", "http:team-b"}
    resp = await admin.http.get(f"{c.base}/admin/api/usage?group_by=user&days=1&format=csv")
    assert resp.headers["Content-Type"].startswith("text/csv")
    assert "usage-user-1d.csv" in resp.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(await resp.text())))
    assert sorted(r["key"] for r in rows) == ["http:ann", "http:carl", "http:dan"]
    assert sum(int(r["tokens"]) for r in rows) == 45 and rows[0]["requests"] == "1"


async def test_patch_changes_the_model_of_the_next_message_and_is_audited(console) -> None:
    c, main, cheap = await seed(console)
    admin = await c.client("alice")
    status, body = await admin.send(
        "PATCH", "/admin/api/chats/http/team-a/settings", {"model": "gpt9"}
    )
    assert status == 400 and body["field"] == "model" and "gpt9" in body["error"]
    status, body = await admin.send("PATCH", "/admin/api/chats/http/team-a/settings", {"colour": 1})
    assert status == 400 and body["field"] == "colour"
    status, detail = await admin.send(
        "PATCH", "/admin/api/chats/http/team-a/settings", {"model": "cheap", "language": "zh"}
    )
    assert status == 200
    model = detail["settings"]["model"]
    assert model["value"] == "cheap" and model["source"].startswith("override by admin:alice at ")
    assert model["override"]["set_by"] == "admin:alice"
    reply = await c.chat("team-a", "again", sender="ann", is_group=True, at_bot=True)
    assert [r["text"] for r in reply["replies"]] == ["from cheap"]
    assert len(cheap.requests) == 1 and len(main.requests) == 3
    # The chat's own command shows the console's change as its source.
    rows = await c.tb.bot.storage.run(c.tb.bot.storage.chat_state.usage_rows, "team-a")
    assert [r.model_name for r in rows] == ["main", "cheap"]
    # null returns the key to the config.
    status, detail = await admin.send(
        "PATCH", "/admin/api/chats/http/team-a/settings", {"model": None}
    )
    assert detail["settings"]["model"]["source"] == "bot.model"
    status, audit = await admin.get("/admin/api/audit?chat=http:team-a")
    changes = [
        (e["user"], e["action"], e["detail"]["key"], e["detail"]["new"]) for e in audit["entries"]
    ]
    assert changes == [
        ("alice", "settings", "model", None),
        ("alice", "settings", "language", "zh"),
        ("alice", "settings", "model", "cheap"),
    ]
    assert audit["entries"][0]["detail"]["old"] == "cheap"
    # Reset: as /reset in the chat.
    status, done = await admin.send("POST", "/admin/api/chats/http/team-a/reset")
    assert status == 200 and done["ok"] and done["reset_after"] > 0
    detail = (await admin.get("/admin/api/chats/http/team-a"))[1]
    assert detail["settings"]["reset"]["value"] == done["reset_after"]
    assert detail["settings"]["reset"]["source"].startswith("override by admin:alice")


async def test_a_chats_own_limits_and_functions_apply_to_its_next_messages(console) -> None:
    c, main, _cheap = await seed(console)
    main.add(say("one"), say("two"))
    admin = await c.client("alice")
    body = {"limits": {"per_chat": {"messages_per_minute": 1}}, "functions": {"disabled": ["roll"]}}
    status, detail = await admin.send("PATCH", "/admin/api/chats/http/team-b/settings", body)
    assert status == 200
    assert detail["settings"]["limits"]["value"]["per_chat"]["messages_per_minute"] == 1
    assert detail["settings"]["functions"]["value"]["disabled"] == ["roll"]
    bad = {"limits": {"per_chat": {"messages_per_minute": 0}}}
    status, error = await admin.send("PATCH", "/admin/api/chats/http/team-b/settings", bad)
    assert status == 400 and error["field"] == "limits"
    bad = {"functions": {"disabled": ["rol"]}}
    status, error = await admin.send("PATCH", "/admin/api/chats/http/team-b/settings", bad)
    assert (status, error["error"]) == (400, "functions.disabled: no function matches 'rol'")
    group = {"is_group": True, "at_bot": True}
    first = await c.chat("team-b", "first", sender="dan", **group)
    assert [r["text"] for r in first["replies"]] == ["one"]
    assert "roll" not in [t.name for t in main.requests[-1].tools]
    second = await c.chat("team-b", "second", sender="eve", **group)
    assert "limit of 1 messages per minute" in second["replies"][0]["text"]
    assert len(main.requests) == 4  # the second was refused before any model request
    # Other chats keep the config's (no) limit.
    assert (await c.chat("team-a", "hi", sender="ann", **group))["replies"][0]["text"] == "two"
    page = (await admin.get("/admin/api/chats/http/team-b/history"))[1]
    refused = [m for m in page["messages"] if m["text"] == "second"][0]
    trace = (await admin.get(f"/admin/api/turns/http/team-b/{refused['message_id']}"))[1]
    [check] = trace["limits"]
    assert (check["scope"], check["metric"], check["limit"], check["value"]) == (
        "chat",
        "messages_per_minute",
        1,
        1,
    )
    assert check["outcome"] == "refused" and trace["model_requests"] == []
    assert trace["deliveries"][0]["notice"] is True


async def test_reminders_delivery_plugins_and_audit(console) -> None:
    c = await console(builtins=True)
    admin = await c.client("alice")
    reply = await c.chat("team-a", "/reminder_set in 1h stand up", sender="ann", is_group=True)
    assert "stand up" in reply["replies"][0]["text"]
    status, found = await admin.get("/admin/api/reminders")
    [rem] = found["reminders"]
    assert (rem["platform"], rem["chat_id"], rem["text"], rem["status"]) == (
        "http",
        "team-a",
        "stand up",
        "active",
    )
    assert datetime.fromisoformat(rem["next_run"]) > datetime.now(UTC)
    assert (await admin.send("DELETE", "/admin/api/reminders/nope"))[0] == 404
    status, done = await admin.send("DELETE", f"/admin/api/reminders/{rem['id']}")
    assert status == 200 and done["status"] == "deleted"
    assert (await admin.get("/admin/api/reminders"))[1]["reminders"] == []
    assert (await admin.get("/admin/api/reminders?status=all"))[1]["reminders"][0][
        "status"
    ] == "deleted"
    assert (await admin.send("DELETE", f"/admin/api/reminders/{rem['id']}"))[0] == 409

    # A message nobody takes (an HTTP chat without a /v1/events subscriber) waits in the outbox.
    from chatfn.common.messages import OutgoingMessage

    await c.tb.bot.send(OutgoingMessage("http", "team-a", "nobody listens", True))
    await c.tb.bot.outbox.flush_marks()
    status, queue = await admin.get("/admin/api/delivery")
    [row] = queue["rows"]
    assert (row["state"], row["text"], row["chat_id"]) == ("pending", "nobody listens", "team-a")
    assert queue["summary"] == [
        {
            "platform": "http",
            "chat_id": "team-a",
            "pending": 1,
            "expired": 0,
            "failed": 0,
            "oldest_pending_at": row["created_at"],
        }
    ]
    storage = c.tb.bot.storage
    await storage.run(storage.outbox.expire, 0)
    expired = (await admin.get("/admin/api/delivery?state=expired"))[1]["rows"]
    assert [r["event_id"] for r in expired] == [row["event_id"]]
    overview = (await admin.get("/admin/api/overview?days=1"))[1]
    assert overview["health"]["outbox"]["expired"] == 1
    status, done = await admin.send("POST", f"/admin/api/delivery/{row['event_id']}/retry")
    assert status == 200 and done["state"] == "pending"
    assert (await admin.get("/admin/api/delivery?state=pending"))[1]["rows"][0]["event_id"] == row[
        "event_id"
    ]
    assert (await admin.send("POST", "/admin/api/delivery/999999/retry"))[0] == 404

    status, plugins = await admin.get("/admin/api/plugins")
    states = {p["name"]: p["state"] for p in plugins["plugins"]}
    assert states["reminders"] == "on" and states["web_search"] == "missing key"
    assert "reminder_set" in [f for p in plugins["plugins"] for f in p["functions"]]

    actions = [e["action"] for e in (await admin.get("/admin/api/audit"))[1]["entries"]]
    assert actions[:3] == ["delivery.retry", "reminder.cancel", "login"]
