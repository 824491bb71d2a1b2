"""Built-ins switched off as installed plugins are (issue 37 §4, "on/off per plugin"):
`plugins.disabled: [reminders]` keeps a built-in from being wired at all (no functions, no
tables, no hooks, no console views) and the rest of the bot answers; `help` is required (the
core's own replies point to /help): naming it is a config error, a glob passes it by."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatfn.check import Report, check_plugin_probes
from chatfn.runtime.console import ops as console_ops
from chatfn.runtime.console import views as console_views
from chatfn.runtime.plugins import load_builtins
from chatfn.runtime.settings import ConfigError, parse_settings
from chatfn.testing import ScriptedModel, TestBot, say
from function_calls.tables import stored_version

OPTIONAL = sorted(p.name for p in load_builtins() if not p.required)


def test_only_help_is_required() -> None:
    assert [p.name for p in load_builtins() if p.required] == ["help"]
    assert "reminders" in OPTIONAL and len(OPTIONAL) == len(load_builtins()) - 1


@pytest.mark.parametrize("name", OPTIONAL)
async def test_a_built_in_in_plugins_disabled_is_not_wired_and_the_bot_answers(
    tmp_path: Path, name: str
) -> None:
    config = {"bot": {"admins": ["root"]}, "plugins": {"paths": [], "disabled": [name]}}
    tb = TestBot(tmp_path, model=ScriptedModel([say("hi")], repeat_last=True), config=config)
    loaded = next(p for p in tb.settings.plugins_loaded or [] if p.name == name)
    mine = {s.name for s in loaded.specs()}
    try:
        await tb.start()
        assert all(tb.bot.registry.get(f) is None for f in mine)
        assert name not in {p.name for p in tb.bot.plugins} and name in tb.bot.unwired
        assert await tb.send("hello") == ["hi"]
        (listing,) = await tb.send("/help", sender="root")
        assert not any(f"/{f}" in listing for f in mine), listing
        (settings,) = await tb.send("/settings", sender="root")
        assert settings.startswith("Unknown command") == (name == "chat_admin"), settings
        if mine:
            (reply,) = await tb.send(f"/{sorted(mine)[0]}", sender="root")
            assert reply.startswith("Unknown command"), reply
        # Its tables are not made nor migrated (the rows of an earlier run are kept as they
        # are), its console views are gone, its state says why.
        plugin = loaded.plugin
        assert plugin is not None
        if plugin.tables_for(tb.settings) is not None:
            engine = tb.bot.storage.engine
            assert await tb.bot.storage.run(stored_version, engine, name) is None
        shown = {v.name for v in console_views.views(tb.bot)}
        assert not {v.name for v in plugin.console} & shown
        row = next(p for p in console_ops.plugins(tb.bot)["plugins"] if p["name"] == name)
        assert row["state"] == "off" and row["status"] == "listed in plugins.disabled"
        assert row["builtin"] is True and row["required"] is False
    finally:
        await tb.aclose()


def test_help_is_required_and_a_glob_passes_it_by(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"plugins\.disabled: help is a required built-in"):
        parse_settings({"plugins": {"paths": [], "disabled": ["help"]}}, tmp_path)
    settings = parse_settings({"plugins": {"paths": [], "disabled": ["*"]}}, tmp_path)
    running = [p.name for p in settings.plugins_loaded or [] if p.runs(settings)]
    assert running == ["help"]


def test_chatfn_check_does_not_probe_a_built_in_in_plugins_disabled(tmp_path: Path) -> None:
    servers = {"mcp": {"servers": {"files": {"command": "no-such-mcp-server-here"}}}}

    def probes(**plugins: list[str]) -> list[str]:
        data = {**servers, "plugins": {"paths": [], **plugins}}
        report = Report()
        check_plugin_probes(report, parse_settings(data, tmp_path), online=False)
        return [c.name for c in report.checks]

    assert probes() == ["mcp files"]
    assert probes(disabled=["mcp"]) == []
