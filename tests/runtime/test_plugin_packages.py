"""Installed plugin packages (issue 37, section 3): found through the `chatfn.plugins`
entry-point group as channels are, chosen with `plugins.enabled` / `plugins.disabled`, their
metadata shown by `chatfn check`, one whose chatfn range excludes this version left out with one
log line; and failure isolation: a plugin that keeps failing is switched off for a cool-down
(its breaker), one whose start-up hook raises or hangs is switched off, never the bot.

Each plugin here is a real distribution on sys.path (a module and a .dist-info with the
METADATA and entry_points.txt pip writes), found by importlib.metadata as pip's would be."""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from chatfn.check import Report, check_plugin_status
from chatfn.common.messages import OutgoingMessage
from chatfn.common.version import __version__
from chatfn.runtime.console import ops as console_ops
from chatfn.runtime.settings import parse_settings
from chatfn.testing import TestBot

Install = Callable[..., Path]


def write_dist(
    site: Path,
    module: str,
    source: str,
    *,
    entry: str | None = None,
    dist: str | None = None,
    version: str = "1.0.0",
    requires: tuple[str, ...] = (),
    summary: str = "",
) -> Path:
    """`module` (its source) as an installed distribution declaring entry point `entry`."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    name = dist or module.replace("_", "-")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Summary: {summary}"] if summary else []
    lines += ["Author: Ada", "Home-page: https://example.org/" + name]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        f"[chatfn.plugins]\n{entry or module} = {module}\n", encoding="utf-8"
    )
    return info


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    made: list[str] = []

    def add(module: str, source: str, **kw: Any) -> Path:
        made.append(module)
        info = write_dist(site, module, source, **kw)
        importlib.invalidate_caches()
        return info

    yield add
    for module in made:
        sys.modules.pop(module, None)


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m).rstrip()), level="INFO", format="{message}")
    yield lines
    logger.remove(sink)


WEATHER = """
    from pydantic import BaseModel
    from function_calls import FunctionResult, MessageContext, Plugin, tool_function

    plugin = Plugin(
        "weather",
        description="Weather for a city.",
        permissions=("network",),
        chatfn=">=0.1",
    )

    class CityArgs(BaseModel):
        city: str

    @tool_function(description="Current weather in a city.")
    async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
        return FunctionResult(messages=[f"Sunny in {args.city}"])
"""


async def test_an_installed_package_is_found_and_its_function_runs(
    install: Install, tmp_path: Path
) -> None:
    install("chatfn_weather", WEATHER, entry="weather", summary="From its METADATA")
    tb = TestBot(tmp_path)
    try:
        assert "weather" in {p.name for p in tb.bot.plugins}
        assert await tb.send("/weather city=Oslo") == ["Sunny in Oslo"]
        meta = next(p.meta for p in tb.bot.plugins if p.name == "weather")
        assert meta is not None
        # The declaration wins over the distribution; what it leaves out comes from there.
        assert (meta.distribution, meta.version, meta.description) == (
            "chatfn-weather",
            "1.0.0",
            "Weather for a city.",
        )
        assert (meta.author, meta.homepage) == ("Ada", "https://example.org/chatfn-weather")
        assert meta.permissions == ("network",) and meta.chatfn == ">=0.1"
        report = Report()
        check_plugin_status(report, tb.settings)
        line = next(
            (c.name, c.status, c.detail) for c in report.checks if c.name == "plugin weather"
        )
        assert "chatfn-weather 1.0.0" in line[2] and "permissions: network" in line[2]
    finally:
        await tb.aclose()


@pytest.mark.parametrize(
    ("choice", "loaded"),
    [
        ({}, True),
        ({"disabled": ["weath*"]}, False),
        ({"disabled": ["chatfn-weather"]}, False),  # by distribution name
        ({"enabled": ["other"]}, False),
        ({"enabled": ["weather"], "disabled": ["nothing*"]}, True),
    ],
)
def test_enabled_and_disabled_choose_among_the_installed(
    install: Install, tmp_path: Path, choice: dict[str, list[str]], loaded: bool
) -> None:
    install("chatfn_weather", WEATHER, entry="weather")
    settings = parse_settings({"plugins": {"paths": [], **choice}}, tmp_path)
    names = {p.name for p in settings.plugins_loaded or []}
    assert ("weather" in names) is loaded
    if not loaded:
        assert "plugins.enabled" in settings.plugins_skipped["weather"]


async def test_a_plugin_for_another_chatfn_is_left_out_in_one_line(
    install: Install, tmp_path: Path, log_lines: list[str]
) -> None:
    # One range from its distribution (not even imported), one from its declaration.
    install(
        "chatfn_future",
        "raise RuntimeError('must not be imported')\n",
        entry="future",
        requires=("chatfn>=99",),
    )
    install(
        "chatfn_old",
        WEATHER.replace('"weather",', '"old",').replace('chatfn=">=0.1"', 'chatfn="<0.1"'),
        entry="old",
    )
    install("chatfn_weather", WEATHER, entry="weather")
    tb = TestBot(tmp_path)
    try:
        await tb.start()
        assert {"weather"} <= {p.name for p in tb.bot.plugins}
        assert not {"future", "old"} & {p.name for p in tb.bot.plugins}
        assert await tb.send("/weather city=Rome") == ["Sunny in Rome"]
        future = [line for line in log_lines if "plugin future" in line]
        old = [line for line in log_lines if "plugin old" in line]
        assert future == [
            f"plugin future not loaded: it supports chatfn >=99, this is chatfn {__version__}"
        ]
        assert len(old) == 1 and "<0.1" in old[0]
        not_loaded = console_ops.plugins(tb.bot)["not_loaded"]
        assert {n["name"] for n in not_loaded} == {"future", "old"}
        report = Report()
        check_plugin_status(report, tb.settings)
        rows = {c.name: (c.name, c.status, c.detail) for c in report.checks}
        assert rows["plugin future"][1] == "warn" and ">=99" in rows["plugin future"][2]
    finally:
        await tb.aclose()


def test_a_broken_package_does_not_stop_the_bot(install: Install, tmp_path: Path) -> None:
    install("chatfn_broken", "import no_such_module_at_all\n", entry="broken")
    settings = parse_settings({"plugins": {"paths": []}}, tmp_path)
    assert "ModuleNotFoundError" in settings.plugins_skipped["broken"]


def test_a_plugin_file_with_another_chatfn_range_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "later.py").write_text(
        textwrap.dedent(WEATHER).replace('"weather",', '"later",').replace(">=0.1", ">=99")
    )
    (folder / "bad.py").write_text('from function_calls import Plugin\nplugin = Plugin("bad")\n')
    settings = parse_settings({"plugins": {"paths": ["plugins"]}}, tmp_path)
    names = {p.name for p in settings.plugins_loaded or []}
    assert "bad" in names and "later" not in names


FLAKY = """
    from function_calls import FunctionResult, MessageContext, Plugin, tool_function

    plugin = Plugin("flaky")
    calls = {"n": 0}

    @tool_function(description="Always fails.")
    async def flaky(ctx: MessageContext) -> FunctionResult:
        calls["n"] += 1
        raise RuntimeError("backend down")

    @tool_function(description="Fine.")
    async def steady(ctx: MessageContext) -> FunctionResult:
        return FunctionResult(messages=["steady"])
"""


class Recorder:
    platform = "test"

    def __init__(self) -> None:
        self.sent: list[OutgoingMessage] = []

    async def send(self, message: OutgoingMessage) -> None:
        self.sent.append(message)


async def test_the_breaker_opens_after_failures_and_closes_after_the_cool_down(
    install: Install, tmp_path: Path, log_lines: list[str]
) -> None:
    install("chatfn_flaky", FLAKY, entry="flaky")
    now = [1000.0]
    breaker = {"failures": 3, "window": 60, "cooldown": 120, "notify": ["test:ops"]}
    tb = TestBot(
        tmp_path, config={"plugins": {"paths": [], "breaker": breaker}}, clock=lambda: now[0]
    )
    recorder = Recorder()
    tb.bot.delivery.register(recorder)
    module = sys.modules["chatfn_flaky"]
    try:
        await tb.start()
        for _ in range(3):
            (reply,) = await tb.send("/flaky")
            assert "failed" in reply
            now[0] += 1
        # Open: its functions are gone, the rest of the bot goes on.
        assert tb.bot.registry.get("flaky") is None and tb.bot.registry.get("steady") is None
        assert await tb.send("/help") != []
        (reply,) = await tb.send("/flaky")
        assert "Unknown command" in reply and module.calls["n"] == 3
        switched = [line for line in log_lines if "switched off" in line]
        assert switched == ["plugin flaky switched off: 3 failures within 60 s; off for 120 s"]
        await tb.bot.guard.drain()
        notices = [m for m in recorder.sent if m.chat_id == "ops"]
        assert len(notices) == 1 and notices[0].notice and "flaky" in notices[0].text
        assert tb.bot.metrics.plugins_switched_off.values == {("flaky", "failures"): 1}
        # The console's plugins page says so (GET /admin/api/plugins).
        shown = {p["name"]: p for p in console_ops.plugins(tb.bot)["plugins"]}
        assert shown["flaky"]["state"] == "off"
        assert "too many failures" in shown["flaky"]["status"]
        assert shown["flaky"]["meta"]["distribution"] == "chatfn-flaky"
        assert shown["reminders"]["meta"] is None or shown["reminders"]["builtin"]
        # After the cool-down (the bot's clock), the next message finds it on again;
        # half-open, one more failure switches it off again at once.
        now[0] += 121
        (reply,) = await tb.send("/flaky")
        assert "failed" in reply and module.calls["n"] == 4
        assert tb.bot.registry.get("flaky") is None
        assert tb.bot.metrics.plugins_switched_off.values == {("flaky", "failures"): 2}
        now[0] += 121
        assert await tb.send("/steady") == ["steady"]  # a call that goes well closes it
        assert tb.bot.registry.get("flaky") is not None
        await tb.send("/flaky")
        assert tb.bot.registry.get("flaky") is not None and module.calls["n"] == 5
    finally:
        await tb.aclose()


async def test_failures_outside_the_window_do_not_open_it(install: Install, tmp_path: Path) -> None:
    install("chatfn_flaky", FLAKY, entry="flaky")
    now = [0.0]
    breaker = {"failures": 3, "window": 10, "cooldown": 120}
    tb = TestBot(
        tmp_path, config={"plugins": {"paths": [], "breaker": breaker}}, clock=lambda: now[0]
    )
    try:
        for _ in range(6):
            await tb.send("/flaky")
            now[0] += 6  # two failures per window at most
        assert tb.bot.registry.get("flaky") is not None
    finally:
        await tb.aclose()


STARTUP = """
    import asyncio
    from function_calls import FunctionResult, MessageContext, Plugin, PluginHost, tool_function

    plugin = Plugin("{name}")
    stopped = []

    @plugin.on_startup
    async def start(host: PluginHost) -> None:
        {body}

    @plugin.on_shutdown
    async def stop(host: PluginHost) -> None:
        stopped.append(True)

    @tool_function(name="{name}_ping", description="Ping.")
    async def ping(ctx: MessageContext) -> FunctionResult:
        return FunctionResult(messages=["pong"])
"""


async def test_a_start_up_hook_that_hangs_or_raises_switches_off_its_plugin_only(
    install: Install, tmp_path: Path, log_lines: list[str]
) -> None:
    install(
        "chatfn_hangs",
        STARTUP.format(name="hangs", body="await asyncio.Event().wait()"),
        entry="hangs",
    )
    install(
        "chatfn_raises",
        STARTUP.format(name="raises", body="raise ValueError('no key')"),
        entry="raises",
    )
    install("chatfn_fine", STARTUP.format(name="fine", body="return None"), entry="fine")
    config = {"plugins": {"paths": [], "startup_timeout": 0.2}}
    tb = TestBot(tmp_path, config=config)
    try:
        await asyncio.wait_for(tb.start(), 10)
        assert await tb.send("/fine_ping") == ["pong"]
        for name in ("hangs", "raises"):
            assert tb.bot.registry.get(f"{name}_ping") is None
            assert "Unknown command" in (await tb.send(f"/{name}_ping"))[0]
        lines = [line for line in log_lines if "switched off" in line]
        assert sorted(lines) == [
            "plugin hangs switched off: its start-up hook took longer than 0.2 s; "
            "off until a restart",
            "plugin raises switched off: its start-up hook raised ValueError: no key; "
            "off until a restart",
        ]
        assert tb.bot.metrics.plugins_switched_off.values == {
            ("hangs", "startup"): 1,
            ("raises", "startup"): 1,
        }
    finally:
        await tb.aclose()
    # A plugin that did not start is not stopped; one that did is.
    assert sys.modules["chatfn_fine"].stopped == [True]
    assert sys.modules["chatfn_hangs"].stopped == []
