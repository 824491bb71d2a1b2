"""A plugin that keeps failing is switched off with one log line, an admin notice and a metric
(issue 37 §3, "Failure isolation"), with no `plugins.breaker.notify` set: the notice reaches the
private chat each of `bot.admins` writes to the bot from (not a group of theirs, not a non-admin),
the console's audit has a row and its Plugins page says until when it cools down; the rest of
the bot keeps answering; after the cool-down (the bot's clock, no sleep) it is on again, and
failing again at once is audited and counted but not messaged to the admins a second time.
`plugins.breaker.notify`, where set, names the chats told instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chatfn.common.config import BreakerSettings
from chatfn.common.metrics import Metrics
from chatfn.runtime.console import ops as console_ops
from chatfn.runtime.plugin_breaker import PluginGuard
from chatfn.storage.console.scope import EVERYTHING
from chatfn.storage.console.sessions import audit_page
from chatfn.testing import ScriptedModel, TestBot
from providers.scripted import call, say
from tests.runtime.test_plugin_packages import (
    Recorder,  # the `test` platform's sender: what the bot sends on its own
)

BROKEN = """
from function_calls import FunctionResult, MessageContext, Plugin, tool_function

plugin = Plugin("broken")
calls = []


@tool_function(description="Fetch the weather (its backend is down).")
async def broken_weather(ctx: MessageContext) -> FunctionResult:
    calls.append(ctx.message.text)
    raise RuntimeError("backend down")
"""


def model() -> ScriptedModel:
    """Calls broken_weather for "weather", says "sorry" after a function's result, "hi" else."""

    def step(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return say("sorry, no weather")
        return call("broken_weather") if "weather" in (last.content or "") else say("hi")

    return ScriptedModel([step], repeat_last=True)


def make(tmp_path: Path, now: list[float], **breaker: Any) -> TestBot:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "broken.py").write_text(BROKEN)
    config = {
        "bot": {"admins": ["root", "ada"]},
        "plugins": {
            "paths": [str(folder)],
            "breaker": {"failures": 3, "window": 60, "cooldown": 120, **breaker},
        },
    }
    return TestBot(tmp_path, model=model(), config=config, clock=lambda: now[0])


async def test_the_admins_are_told_with_no_notify_setting_and_it_comes_back_after_the_cool_down(
    tmp_path: Path,
) -> None:
    now = [2_000_000_000.0]  # 2033-05-18 03:33:20 UTC
    tb = make(tmp_path, now)
    recorder = Recorder()
    tb.bot.delivery.register(recorder)
    try:
        await tb.start()
        # root writes to the bot in private and in a group; ada never did; bob is no admin.
        assert await tb.send("hello", sender="root") == ["hi"]
        assert await tb.send("hello", sender="root", group="team", at_bot=True) == ["hi"]
        assert await tb.send("hello", sender="bob") == ["hi"]
        for _ in range(3):  # the model calls it, it raises each time
            assert await tb.send("weather please", sender="bob") == ["sorry, no weather"]
            now[0] += 1
        assert tb.bot.registry.get("broken_weather") is None  # off: not offered, not callable
        await tb.bot.guard.drain()
        # The notice: root's private chat only (its id is not root's), marked a notice.
        told = [(m.platform, m.chat_id) for m in recorder.sent]
        assert told == [("test", "private:root")], told
        assert recorder.sent[0].notice and "broken" in recorder.sent[0].text
        assert "3 failures within 60 s" in recorder.sent[0].text
        assert tb.bot.metrics.plugins_switched_off.values == {("broken", "failures"): 1}
        # The console: an audit row, and the Plugins page's state with the cool-down's end.
        entries, _ = audit_page(tb.bot.storage.engine, EVERYTHING, 10)
        (row,) = [e for e in entries if e["action"] == "plugin.switched_off"]
        assert row["detail"]["plugin"] == "broken" and row["detail"]["reason"] == "failures"
        assert row["detail"]["until"].startswith("2033-05-18T03:35:22")
        shown = {p["name"]: p for p in console_ops.plugins(tb.bot)["plugins"]}
        assert shown["broken"]["state"] == "off"
        assert "cooling down until 2033-05-18 03:35:22 UTC" in shown["broken"]["status"]
        assert shown["broken"]["off_until"] == "2033-05-18T03:35:22Z"
        # The rest of the bot keeps answering, and the model is no longer offered it.
        assert await tb.send("hello again", sender="bob") == ["hi"]
        assert await tb.send("/help", sender="bob") != []
        # After the cool-down the next message finds it on again.
        now[0] += 121
        assert await tb.send("hello", sender="bob") == ["hi"]
        assert tb.bot.registry.get("broken_weather") is not None
        shown = {p["name"]: p for p in console_ops.plugins(tb.bot)["plugins"]}
        assert shown["broken"]["state"] == "on" and shown["broken"]["off_until"] is None
        # Half-open: one more failure switches it off again, counted and audited, but the
        # admins, told already and with nothing gone well since, are not messaged again.
        assert await tb.send("weather now?", sender="bob") == ["sorry, no weather"]
        assert tb.bot.registry.get("broken_weather") is None
        await tb.bot.guard.drain()
        assert tb.bot.metrics.plugins_switched_off.values == {("broken", "failures"): 2}
        entries, _ = audit_page(tb.bot.storage.engine, EVERYTHING, 10)
        assert [e["action"] for e in entries].count("plugin.switched_off") == 2
        assert len(recorder.sent) == 1
    finally:
        await tb.aclose()


async def test_plugins_breaker_notify_names_the_chats_told_instead(tmp_path: Path) -> None:
    now = [1000.0]
    tb = make(tmp_path, now, notify=["test:ops"])
    recorder = Recorder()
    tb.bot.delivery.register(recorder)
    try:
        await tb.start()
        await tb.send("hello", sender="root")
        for _ in range(3):
            await tb.send("/broken_weather", sender="bob")
        await tb.bot.guard.drain()
        assert [(m.platform, m.chat_id) for m in recorder.sent] == [("test", "ops")]
    finally:
        await tb.aclose()


async def test_a_call_that_went_well_lets_the_next_switch_off_message_the_admins_again() -> None:
    now = [0.0]
    told: list[tuple[str, bool]] = []

    async def notify(plugin: str, why: str, reason: str, repeat: bool) -> None:
        told.append((why, repeat))

    settings = BreakerSettings(failures=1, window=60, cooldown=10)
    guard = PluginGuard(settings, lambda: now[0], Metrics(), lambda s: None, lambda n: None, notify)
    guard.watch("p", [])
    guard.record("p", ok=False)  # off: told
    now[0] += 11
    guard.tick()
    guard.record("p", ok=False)  # half-open, failed again: a repeat
    now[0] += 11
    guard.tick()
    guard.record("p", ok=True)  # went well: closed
    guard.record("p", ok=False)  # off again: told again
    await guard.drain()
    assert [repeat for _, repeat in told] == [False, True, False]
    assert "after its cool-down" in told[1][0]
