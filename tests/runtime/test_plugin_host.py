"""What plugin code is handed as `host` (issue 37 §2): the plugin API's doors, never the Bot.
Hooks, event handlers, console routes and health callbacks get `BotPluginHost`
(chatfn/runtime/plugin_host.py); the Bot's storage, router and outbox are not reachable through
it, not even as a private attribute, and a plugin's tables still are (`plugin.database(host)`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.runtime.bot import Bot
from chatfn.runtime.plugin_host import BotPluginHost
from chatfn.testing import ScriptedModel, TestBot, say
from function_calls import FunctionResult, MessageContext, PluginHost
from function_calls.registry import schema_function
from tests.kit.until import until

PLUGIN = """
from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, Table

from function_calls import Metric, Plugin, PluginHost, Tables

metadata = MetaData()
notes = Table("hostcheck_notes", metadata, Column("id", Integer, primary_key=True))


class HostCheckSettings(BaseModel):
    greeting: str = "hi"


class Greeter:
    pass


plugin = Plugin(
    "hostcheck",
    settings=HostCheckSettings,
    tables=Tables(metadata, version=1),
    metrics=[Metric("chatfn_hostcheck_seen", "Events the test plugin saw.")],
)
SEEN = []


@plugin.on_setup
def setup(host: PluginHost) -> None:
    SEEN.append(("setup", host))
    host.provide(Greeter())


@plugin.on_startup
async def started(host: PluginHost) -> None:
    SEEN.append(("startup", host))


@plugin.on_event("member_joined")
async def joined(host: PluginHost, event) -> list:
    SEEN.append(("event", host))
    host.counter("chatfn_hostcheck_seen").labels().inc()
    return []
"""


class Channel:
    """A platform that takes every message the bot sends it."""

    platform = "hostcheck"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message.text)


def _bot(tmp_path: Path) -> TestBot:
    folder = tmp_path / "my_plugins"
    folder.mkdir()
    (folder / "hostcheck.py").write_text(PLUGIN)
    config = {"plugins": {"paths": [str(folder)]}, "hostcheck": {"greeting": "hello"}}
    return TestBot(tmp_path, model=ScriptedModel([say("ok")], repeat_last=True), config=config)


def _module(tmp_path: Path) -> ModuleType:
    """The plugin module this test's bot loaded (each test's file is a module of its own)."""
    return next(
        m
        for n, m in sys.modules.items()
        if n.startswith("chatfn_plugin_hostcheck") and str(m.__file__).startswith(str(tmp_path))
    )


async def test_hooks_and_handlers_get_the_plugin_host_not_the_bot(tmp_path: Path) -> None:
    tb = _bot(tmp_path)
    try:
        await tb.start()
        await tb.bot.handle_event(SystemEvent("member_joined", "t", "group:1", "u1"))
        module = _module(tmp_path)
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
        # ... and nothing else of the Bot is there, not even under a private name.
        for name in (
            "storage",
            "router",
            "outbox",
            "delivery",
            "registry",
            "channel_host",
            "plugin_host",
            "_bot",
            "bot",
            "_storage_for_tables",
            "__dict__",
        ):
            with pytest.raises(
                AttributeError, match=r"a plugin's host has no .*plugin\.database\(host\)"
            ):
                getattr(host, name)
        with pytest.raises(AttributeError):
            host.storage = object()  # type: ignore[attr-defined]
        assert not [v for v in _public_values(host) if isinstance(v, Bot)]
    finally:
        await tb.aclose()


def _public_values(host: object) -> list[Any]:
    return [getattr(host, n) for n in dir(host) if not n.startswith("_")]


async def test_every_door_of_the_protocol_works_through_the_host(tmp_path: Path) -> None:
    """settings, model, section (above), provide and service, counter, send, language_of,
    add_function, remove_function, refusal_for: each reaches the bot."""
    tb = _bot(tmp_path)
    channel = Channel()
    tb.bot.channel_host.register(channel)
    try:
        await tb.start()
        host = tb.bot.plugin_host
        module = _module(tmp_path)
        # provide (in the setup hook) and service.
        greeter = host.service(module.Greeter)
        assert isinstance(greeter, module.Greeter)
        # counter: the plugin's declared one, the same the bot's metrics keep.
        await tb.bot.handle_event(SystemEvent("member_joined", "t", "group:1", "u1"))
        assert host.counter("chatfn_hostcheck_seen").values == {(): 1.0}
        assert tb.bot.metrics.declared("chatfn_hostcheck_seen").values == {(): 1.0}
        # send: stored and delivered by the channel of its platform.
        await host.send(OutgoingMessage("hostcheck", "private:1", "a reminder"))
        await until(lambda: channel.sent == ["a reminder"], 5, "host.send was not delivered")

        # add_function / remove_function, and refusal_for on the function added.
        async def echo(ctx: MessageContext, arguments: dict[str, Any]) -> FunctionResult:
            return FunctionResult(messages=[f"echo {ctx.message.sender_id}"])

        spec = schema_function(
            "hostcheck_echo",
            "Echo who asked.",
            {"type": "object", "properties": {}},
            echo,
            admin_only=True,
        )
        host.add_function(spec)
        assert await tb.send("/hostcheck_echo", sender="root", admin=True) == ["echo root"]
        asking = IncomingMessage(
            platform="test",
            chat_id="private:bob",
            sender_id="bob",
            sender_name="bob",
            text="",
            is_group=False,
            is_at_bot=False,
            message_id="m-host",
        )
        assert await host.refusal_for("hostcheck_echo", asking)  # bob is not an admin
        boss = IncomingMessage(
            platform="test",
            chat_id="private:root",
            sender_id="root",
            sender_name="root",
            text="",
            is_group=False,
            is_at_bot=False,
            message_id="m-root",
            admin_override=True,
        )
        assert await host.refusal_for("hostcheck_echo", boss) is None
        host.remove_function("hostcheck_echo")
        [gone] = await tb.send("/hostcheck_echo", sender="root", admin=True)
        assert "hostcheck_echo" in gone and gone != "echo root"
    finally:
        await tb.aclose()


def test_the_host_offers_exactly_the_protocols_members() -> None:
    """`BotPluginHost` and `PluginHost` (function_calls/plugin.py) match name for name: a door
    added to one and not the other fails here (mypy checks the signatures,
    chatfn/runtime/plugin_host.py)."""
    declared = {n for n in vars(PluginHost) if not n.startswith("_")}
    offered = {n for n in vars(BotPluginHost) if not n.startswith("_")}
    assert offered == declared
    assert set(BotPluginHost.__slots__) == {"__bot", "__weakref__"}  # no __dict__ to add to
