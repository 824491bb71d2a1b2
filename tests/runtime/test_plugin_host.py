"""What plugin code is handed as `host` (issue 37 §2): the plugin API's doors, never the Bot.
Hooks, event handlers, console routes and health callbacks get `BotPluginHost`; the Bot's
storage, router and outbox are not reachable through it, and a plugin's tables still are
(`plugin.database(host)`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from chatfn.common.messages import SystemEvent
from chatfn.runtime.bot import Bot, BotPluginHost
from chatfn.testing import ScriptedModel, TestBot, say

PLUGIN = """
from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, Table

from function_calls import Plugin, PluginHost, Tables

metadata = MetaData()
notes = Table("hostcheck_notes", metadata, Column("id", Integer, primary_key=True))


class HostCheckSettings(BaseModel):
    greeting: str = "hi"


plugin = Plugin(
    "hostcheck", settings=HostCheckSettings, tables=Tables(metadata, version=1)
)
SEEN = []


@plugin.on_setup
def setup(host: PluginHost) -> None:
    SEEN.append(("setup", host))


@plugin.on_startup
async def started(host: PluginHost) -> None:
    SEEN.append(("startup", host))


@plugin.on_event("member_joined")
async def joined(host: PluginHost, event) -> list:
    SEEN.append(("event", host))
    return []
"""


async def test_hooks_and_handlers_get_the_plugin_host_not_the_bot(tmp_path: Path) -> None:
    folder = tmp_path / "my_plugins"
    folder.mkdir()
    (folder / "hostcheck.py").write_text(PLUGIN)
    config = {"plugins": {"paths": [str(folder)]}, "hostcheck": {"greeting": "hello"}}
    tb = TestBot(tmp_path, model=ScriptedModel([say("ok")], repeat_last=True), config=config)
    try:
        await tb.start()
        await tb.bot.handle_event(SystemEvent("member_joined", "t", "group:1", "u1"))
        module = next(m for n, m in sys.modules.items() if n.startswith("chatfn_plugin_hostcheck"))
        kinds = [kind for kind, _ in module.SEEN]
        assert kinds == ["setup", "startup", "event"], kinds
        hosts = {id(host) for _, host in module.SEEN}
        assert hosts == {id(tb.bot.plugin_host)}
        host = tb.bot.plugin_host
        assert isinstance(host, BotPluginHost) and not isinstance(host, Bot)
        # The doors work ...
        assert host.section(module.HostCheckSettings).greeting == "hello"
        assert host.settings is tb.bot.settings and host.model is tb.bot.model
        assert host.language_of("t", "group:1") == tb.bot.language_of("t", "group:1")
        db = module.plugin.database(host)

        def rows() -> list[object]:
            with db.connect() as conn:
                return list(conn.execute(module.notes.select()).all())

        assert await db.run(rows) == []
        # ... and nothing else of the Bot is there.
        for name in ("storage", "router", "outbox", "delivery", "registry", "_bot_storage"):
            with pytest.raises(AttributeError, match="what a plugin may use of the bot is"):
                getattr(host, name)
        with pytest.raises(AttributeError):
            host.storage = object()  # type: ignore[attr-defined]
    finally:
        await tb.aclose()
