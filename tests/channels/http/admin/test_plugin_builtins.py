"""The built-ins on the console's Plugins page (issue 37 §4, "on/off per plugin and per chat"),
switched through the same doors as an installed plugin: off and on for the bot from the next
message (written to `plugins.disabled`), off for one chat, their console pages leaving and
coming back; `help` is always on; a built-in `plugins.disabled` named at start is wired when
switched on if it has only functions, and says it needs a restart if it has more (tables,
hooks, console views)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from chatfn.testing import ScriptedModel
from tests.channels.http.admin.conftest import MakeConsole, admin_config


async def start(make: MakeConsole, tmp_path: Path, **plugins: Any) -> Any:
    data = admin_config(plugins={"paths": [], **plugins})
    c = await make(ScriptedModel([], name="main"), data, builtins=True)
    file = tmp_path / "config.yaml"  # the console writes its changes here
    file.write_text(yaml.safe_dump(data))
    c.tb.bot.settings._config_file = file
    return c


async def reply(c: Any, chat_id: str, text: str) -> str:
    answered = await c.chat(chat_id, text)
    return " ".join(m["text"] for m in answered["replies"])


def disabled_in_file(tmp_path: Path) -> list[str]:
    return list(yaml.safe_load((tmp_path / "config.yaml").read_text())["plugins"]["disabled"])


async def row(alice: Any, name: str) -> dict[str, Any]:
    status, body = await alice.get("/admin/api/plugins")
    assert status == 200
    return dict(next(p for p in body["plugins"] if p["name"] == name))


async def pages(alice: Any) -> set[str]:
    return {p["name"] for p in (await alice.get("/admin/api/session"))[1]["pages"]}


async def test_a_built_in_off_and_on_for_the_bot_and_off_for_one_chat(
    console: MakeConsole, tmp_path: Path
) -> None:
    c = await start(console, tmp_path)
    alice = await c.client("alice")
    assert (await row(alice, "reminders"))["required"] is False
    assert (await row(alice, "help"))["required"] is True
    status, body = await alice.send("POST", "/admin/api/plugins/help/state", {"on": False})
    assert status == 409 and "required" in body["error"]
    assert "Reminder" in await reply(c, "room", "/reminder_set in 1h stretch")
    assert (await alice.get("/admin/api/reminders"))[0] == 200 and "reminders" in await pages(alice)
    # Off for the bot: from the next message, and kept in plugins.disabled.
    status, body = await alice.send("POST", "/admin/api/plugins/reminders/state", {"on": False})
    assert status == 200 and body["done"] == "off" and body["kept"] is True
    assert "start-up hooks" in body["restart"]  # its scheduler stops at the next start
    assert disabled_in_file(tmp_path) == ["reminders"]
    assert (await reply(c, "room", "/reminder_set in 1h x")).startswith("Unknown command")
    assert (await alice.get("/admin/api/reminders"))[0] == 404
    assert "reminders" not in await pages(alice)
    off = await row(alice, "reminders")
    assert off["state"] == "off" and "console" in off["status"] and off["restart"]
    # On again: all of it back for the next message.
    status, body = await alice.send("POST", "/admin/api/plugins/reminders/state", {"on": True})
    assert status == 200 and body["done"] == "on" and body["restart"] is None
    assert disabled_in_file(tmp_path) == []
    assert "Reminder" in await reply(c, "room", "/reminder_set in 2h stretch")
    listed = (await alice.get("/admin/api/reminders"))[1]["reminders"]
    assert len(listed) == 2 and "reminders" in await pages(alice)
    assert (await row(alice, "reminders"))["restart"] is None
    # Off for one chat only.
    body_off = {"chat": "http:room", "on": False}
    assert (await alice.send("POST", "/admin/api/plugins/reminders/chat", body_off))[0] == 200
    state = await alice.get("/admin/api/plugins/reminders/chat?chat=http:room")
    assert state[1]["on"] is False
    assert "disabled in this chat" in await reply(c, "room", "/reminder_set in 1h x")
    assert "Reminder" in await reply(c, "other", "/reminder_set in 1h stretch")
    actions = [e["action"] for e in (await alice.get("/admin/api/audit"))[1]["entries"]]
    assert {"plugin.off", "plugin.on", "plugin.chat_off"} <= set(actions)


async def test_built_ins_disabled_at_start_come_on_now_or_at_the_next_start(
    console: MakeConsole, tmp_path: Path
) -> None:
    c = await start(console, tmp_path, disabled=["why", "reminders"])
    alice = await c.client("alice")
    for name in ("why", "reminders"):
        shown = await row(alice, name)
        assert shown["state"] == "off" and shown["status"] == "listed in plugins.disabled"
    # Nothing of reminders was wired: not its route, nor its page.
    assert (await alice.get("/admin/api/reminders"))[0] == 404
    assert "reminders" not in await pages(alice)
    assert (await reply(c, "room", "/why")).startswith("Unknown command")
    # why has only functions: on from the next message.
    status, body = await alice.send("POST", "/admin/api/plugins/why/state", {"on": True})
    assert status == 200 and body == {"plugin": "why", "done": "on", "restart": None, "kept": True}
    assert not (await reply(c, "room", "/why")).startswith("Unknown command")
    assert disabled_in_file(tmp_path) == ["reminders"]
    # reminders has tables, hooks and a console view: on at the next start.
    status, body = await alice.send("POST", "/admin/api/plugins/reminders/state", {"on": True})
    assert status == 200 and "next start" in body["restart"] and "tables" in body["restart"]
    assert disabled_in_file(tmp_path) == []
    assert (await reply(c, "room", "/reminder_set in 1h x")).startswith("Unknown command")
    assert (await alice.get("/admin/api/reminders"))[0] == 404
    assert "next start" in (await row(alice, "reminders"))["restart"]
