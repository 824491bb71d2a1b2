"""Channels as packages: found through the `chatfn.channels` entry points (a real third-party
distribution on sys.path: tests/fixtures/thirdparty_channel), settings validated per channel,
the built-ins found without an install, and channels given a ChannelHost, never the Bot."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from chatfn.runtime import channel_registry
from chatfn.runtime.bot import Bot, BotChannelHost
from chatfn.runtime.channel_registry import BUILTIN, ChannelNotFound, find_channels, forget_channels
from chatfn.runtime.settings import ConfigError, parse_settings

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "thirdparty_channel"


def install_thirdparty(site: Path) -> Path:
    """The fixture package as an installed distribution: its module, and a .dist-info with
    METADATA and the entry_points.txt pip would write from its pyproject.toml."""
    shutil.copytree(FIXTURE / "echo3p_channel", site / "echo3p_channel")
    info = site / "echo3p_channel-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo3p-channel\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[chatfn.channels]\necho3p = echo3p_channel:SPEC\n")
    return site


@pytest.fixture
def thirdparty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = install_thirdparty(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    forget_channels()
    yield site
    sys.modules.pop("echo3p_channel", None)
    forget_channels()


def test_a_third_party_distribution_adds_a_channel(thirdparty: Path) -> None:
    dist = importlib.metadata.distribution("echo3p-channel")
    assert [e.name for e in dist.entry_points if e.group == "chatfn.channels"] == ["echo3p"]
    found = find_channels()
    assert {"echo3p", *BUILTIN} <= set(found.specs)
    assert found.specs["echo3p"].settings.__name__ == "Echo3pSettings"
    settings = parse_settings({"channels": {"echo3p": {"prefix": "3p: "}}})
    assert settings.channels.echo3p.prefix == "3p: "
    with pytest.raises(ConfigError, match=r"channels\.echo3p\.prefx: unknown key"):
        parse_settings({"channels": {"echo3p": {"prefx": "3p: "}}})


def test_the_bot_runs_a_third_party_channel_and_a_message_round_trips(
    thirdparty: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "storage: {url: 'sqlite:///bot.db'}\n"
        "plugins: {paths: []}\n"
        "channels: {echo3p: {prefix: '3p> ', user: ann}}\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(thirdparty)])}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--config", str(config), "--channel", "echo3p"],
        input="/help\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    replies = [line for line in done.stdout.splitlines() if line.startswith("3p> ")]
    assert replies and "/help" in done.stdout, done.stdout


def test_unknown_channel_names_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_settings({"channels": {"telegrm": {}}})
    assert "channels.telegrm: no channel named 'telegrm' is installed (found: " in str(exc.value)
    with pytest.raises(ConfigError, match=r"channels\.onebot\.port: "):
        parse_settings({"channels": {"onebot": {"port": "eighty"}}})
    done = subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--channel", "nope"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--channel: no channel named 'nope' is installed" in done.stderr


def test_the_built_ins_are_found_without_an_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source checkout run without `pip install` has no entry points of its own."""
    monkeypatch.setattr(channel_registry, "entry_points", lambda group: [])
    found = find_channels()
    assert found.names() == sorted(BUILTIN) and not found.broken


def test_a_broken_or_clashing_channel_is_reported_not_fatal() -> None:
    broken = EntryPoint("ghost", "no_such_module_here:SPEC", "chatfn.channels")
    clash = EntryPoint("http", "chatfn.channels.onebot:SPEC", "chatfn.channels")
    found = find_channels(extra=[broken, clash])
    assert "http" in found.specs and found.specs["http"].name == "http"
    assert "ModuleNotFoundError" in found.broken["ghost"]
    assert any("taken by" in why for why in found.broken.values())
    with pytest.raises(ChannelNotFound, match="'ghost' failed to load"):
        found.get("ghost")


async def test_channels_get_the_host_never_the_bot(tmp_path: Path) -> None:
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'b.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    bot = Bot(settings, builtins=False, load_plugins=False)
    try:
        for name in ("console", "http", "onebot"):
            channel = find_channels().get(name).build(bot.channel_host)
            assert type(channel.host) is BotChannelHost
            assert not [k for k, v in vars(channel).items() if isinstance(v, Bot)]
            assert bot.delivery.channels[channel.platform] is channel
    finally:
        await bot.aclose()


def test_readme_shows_the_third_party_channel_that_is_tested() -> None:
    readme = (ROOT / "docs" / "running-channels.md").read_text(encoding="utf-8")
    start = readme.index("## Add a channel\n")
    block = readme[start:].split("```python\n", 1)[1].split("```", 1)[0]
    source = (FIXTURE / "echo3p_channel" / "__init__.py").read_text(encoding="utf-8")
    assert block == source[source.index("from __future__") :]


async def test_a_channel_serves_its_webhook_on_the_http_port(tmp_path: Path) -> None:
    """Telegram's webhook_url, Slack's /slack/events: routes a channel asks the host for, served
    by the HTTP channel outside its /v1 token (the platform signs its own requests)."""
    import aiohttp
    from aiohttp import web

    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'w.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": "t0ken"}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(settings, builtins=False, load_plugins=False)
    host = bot.channel_host
    seen: list[dict] = []

    async def hook(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"ok": True})

    http = find_channels().get("http").build(host)
    host.add_web_route("post", "/platform/events", hook)  # after the HTTP channel is built
    with pytest.raises(ValueError, match="another channel"):
        host.add_web_route("POST", "/platform/events", hook)
    with pytest.raises(ValueError, match="a path of its own"):
        host.add_web_route("POST", "/v1/messages", hook)
    await http.start()
    try:
        base = f"http://127.0.0.1:{http.bound_port}"
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{base}/platform/events", json={"e": 1}) as resp:
                assert resp.status == 200 and await resp.json() == {"ok": True}
            async with session.post(f"{base}/v1/messages", json={}) as resp:
                assert resp.status == 401  # the bot's own API keeps its token
        assert seen == [{"e": 1}]
    finally:
        await http.stop()
        await bot.aclose()


def test_a_webhook_channel_without_the_http_channel_is_refused(
    thirdparty: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "storage: {url: 'sqlite:///bot.db'}\n"
        "plugins: {paths: []}\n"
        "channels: {echo3p: {webhook: /echo3p/hook}}\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(thirdparty)])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bot.py"), "--config", str(config), "--channel", "echo3p"],
        input="",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2
    assert "/echo3p/hook need the HTTP channel's port: add --channel http" in done.stderr


def test_check_fails_only_for_the_channels_it_is_asked_for(tmp_path: Path) -> None:
    """A config may describe channels this process does not run (the template lists them all):
    without --channel their problems are warnings; named by --channel, failures."""
    from chatfn.check import run_checks

    config = tmp_path / "config.yaml"
    config.write_text(
        f"storage: {{url: 'sqlite:///{tmp_path / 'c.db'}'}}\n"
        "plugins: {paths: []}\n"
        "channels: {telegram: {}}\n"
    )
    loose = [c for c in run_checks(str(config), False).checks if c.name == "channel telegram"]
    assert loose and all(c.status == "warn" for c in loose)
    assert "needed with --channel telegram" in loose[0].detail
    strict = run_checks(str(config), False, channels=["telegram"])
    assert [c.status for c in strict.checks if c.name == "channel telegram"] == ["fail"]
    assert not strict.ok


PLATFORMS = ("telegram", "slack", "discord", "matrix", "feishu", "qq", "onebot", "weixin")


def test_every_channel_host_member_is_used_by_a_platform_channel() -> None:
    """`ChannelHost` holds what platform channels use and the handle to mount a webhook (issue
    35, section 2): what only the HTTP API and MCP need is `ApiHost`, their own dependency."""
    import re

    from chatfn.runtime.channel_host import ApiHost, ChannelHost

    members = {name for name in vars(ChannelHost) if not name.startswith("_")}
    channels = ROOT / "chatfn" / "channels"
    files = [channels / "base.py"]
    for package in (*PLATFORMS, "kit"):
        files += sorted((channels / package).rglob("*.py"))
    sources = [f.read_text(encoding="utf-8") for f in files]
    unused = sorted(
        name
        for name in members
        if not any(re.search(rf'host\.{name}\b|host, "{name}"', text) for text in sources)
    )
    assert unused == [], f"ChannelHost members no platform channel uses: {unused}"
    assert "add_web_route" in members and "handle" in members
    assert {"outbox", "subscribe", "publish", "exposure", "console", "web"} <= set(vars(ApiHost))
