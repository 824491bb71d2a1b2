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


# A plugin file with a Plugin and a start-up hook, and one with functions alone: plugin files
# obey `plugins.disabled` as built-ins do (by the plugin's name or the file's).
JOKES = """
from pydantic import BaseModel

from function_calls import FunctionResult, MessageContext, Plugin, PluginHost, tool_function

plugin = Plugin("jokes")
STARTED = []


class NoArgs(BaseModel):
    pass


@plugin.on_startup
async def started(host: PluginHost) -> None:
    STARTED.append(True)


@tool_function(name="joke", description="A joke.", scope="both")
async def joke(ctx: MessageContext, args: NoArgs) -> FunctionResult:
    return FunctionResult(messages=["Why did the bot cross the road?"])
"""
ECHO = """
from pydantic import BaseModel

from function_calls import FunctionResult, MessageContext, tool_function


class Said(BaseModel):
    text: str


@tool_function(name="parrot", description="Say it again.", scope="both")
async def parrot(ctx: MessageContext, args: Said) -> FunctionResult:
    return FunctionResult(messages=[f"parrot: {args.text}"])
"""


async def test_plugin_files_in_plugins_disabled_are_not_wired_until_switched_on(
    console: MakeConsole, tmp_path: Path
) -> None:
    folder = tmp_path / "my_plugins"
    folder.mkdir()
    (folder / "jokes_plugin.py").write_text(JOKES)
    (folder / "echo_file.py").write_text(ECHO)
    # jokes by its plugin's name, echo_file (no Plugin) by a glob of its file's name.
    c = await start(console, tmp_path, paths=[str(folder)], disabled=["jokes", "echo_*"])
    alice = await c.client("alice")
    assert (await reply(c, "room", "/joke")).startswith("Unknown command")
    assert (await reply(c, "room", "/parrot hi")).startswith("Unknown command")
    jokes = next(p for p in c.tb.bot.settings.plugins_loaded if p.name == "jokes")
    assert jokes.module.STARTED == []  # its start-up hook did not run
    for name in ("jokes", "echo_file"):
        shown = await row(alice, name)
        assert shown["state"] == "off" and shown["status"] == "listed in plugins.disabled"
        assert shown["builtin"] is False
    # Functions alone: on from the next message, and under the plugin breaker like any file;
    # the glob that named it stays in the file (the console does not rewrite a glob), so the
    # answer says the next start has it off again.
    status, body = await alice.send("POST", "/admin/api/plugins/echo_file/state", {"on": True})
    assert status == 200 and body["done"] == "on" and body["kept"] is False, body
    assert "'echo_*'" in body["restart"], body
    assert await reply(c, "room", "/parrot hi") == "parrot: hi"
    assert c.tb.bot.guard.owner("parrot") == "echo_file"
    assert disabled_in_file(tmp_path) == ["jokes", "echo_*"]
    # A start-up hook: on at the next start, and written so.
    status, body = await alice.send("POST", "/admin/api/plugins/jokes/state", {"on": True})
    assert status == 200 and "next start" in body["restart"] and body["kept"] is True, body
    assert disabled_in_file(tmp_path) == ["echo_*"]
    # Off again from the console: written by its plugin's name, off for the next message.
    status, body = await alice.send("POST", "/admin/api/plugins/echo_file/state", {"on": False})
    assert status == 200 and body["done"] == "off" and body["kept"] is True, body
    assert disabled_in_file(tmp_path) == ["echo_*", "echo_file"]
    assert (await reply(c, "room", "/parrot hi")).startswith("Unknown command")


def test_a_plugin_file_not_named_in_plugins_disabled_runs(tmp_path: Path) -> None:
    from chatfn.runtime.settings import parse_settings

    folder = tmp_path / "my_plugins"
    folder.mkdir()
    (folder / "jokes_plugin.py").write_text(JOKES)
    for disabled, runs in (([], True), (["reminders"], True), (["jokes_plugin"], False)):
        data = {"plugins": {"paths": [str(folder)], "disabled": disabled}}
        settings = parse_settings(data, tmp_path)
        jokes = next(p for p in settings.plugins_loaded or [] if p.name == "jokes")
        assert jokes.runs(settings) is runs, disabled
