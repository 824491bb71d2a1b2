"""What a built-in does, a plugin does through its `Plugin(...)` declaration, and the built-ins
do it only that way: their texts come with the declaration (the core catalogue keeps the
core's), in every language the core speaks, with the placeholders English has; a per-chat key
declared once by a plugin is a `chats:` rule key (a bad value named by the config check), a
line of `/settings` and a field of the console's chat form, with no core edit."""

from __future__ import annotations

import importlib
import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession, CookieJar

from chatfn.channels.http.admin.passwords import hash_password
from chatfn.channels.http.channel import HttpChannel
from chatfn.check import run_checks
from chatfn.common.config import ConfigError
from chatfn.common.i18n import CORE, LANGUAGES, add_texts, texts_of, translate
from chatfn.common.metrics import Metrics
from chatfn.runtime.settings import parse_settings
from chatfn.testing import TestBot
from function_calls.plugin import Plugin
from function_calls.registry import PluginLoadError
from function_calls.tables import stored_version

BUILTINS = (
    "help",
    "reminders",
    "web_search",
    "summary",
    "welcome",
    "mcp",
    "chat_admin",
    "knowledge",
    "why",
    "approvals",
)


def _plugin(name: str) -> Plugin:  # type: ignore[type-arg]
    module = importlib.import_module(f"function_calls.builtins.{name}")
    return module.plugin  # type: ignore[no-any-return]


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_texts_are_complete_and_its_own(name: str) -> None:
    plugin = _plugin(name)
    english = plugin.texts.get("en", {})
    for language in LANGUAGES:
        have = plugin.texts.get(language, {})
        assert set(have) == set(english), f"{name}: {language} differs from English"
        for key, text in have.items():
            assert _fields(text) == _fields(english[key]), (name, key)
            assert translate(language, key, **dict.fromkeys(_fields(text), "x"))
    assert texts_of(name) == set(english)
    assert not set(english) & set(CORE["en"]), "a built-in's text in the core catalogue"


def test_core_catalogue_keeps_only_the_core_texts() -> None:
    for name in BUILTINS:
        _plugin(name)
    owned = set().union(*(texts_of(n) for n in BUILTINS))
    assert len(owned) >= 130
    builtin_words = ("help.", "reminder.", "time.", "summary.", "web_search.", "kb.", "admin.")
    assert [k for k in CORE["en"] if k.startswith(builtin_words)] == []


def test_a_plugin_cannot_take_another_ones_key_or_lack_english() -> None:
    with pytest.raises(ValueError, match="already the core's"):
        add_texts("thief", {"en": {"core.outage": "mine"}})
    _plugin("welcome")
    with pytest.raises(ValueError, match="already welcome's"):
        Plugin("thief", texts={"en": {"welcome.default": "mine"}})
    with pytest.raises(ValueError, match="keys English lacks"):
        Plugin("half", texts={"en": {}, "zh": {"half.only_zh": "只有中文"}})
    add_texts("doors_fixture", {"en": {"doors.hi": "Hi {who}"}, "zh": {"doors.hi": "你好 {who}"}})
    assert translate("zh", "doors.hi", who="x") == "你好 x"
    assert translate("fr", "doors.hi", who="x") == "Hi x"  # a language nobody speaks: English


# -- a per-chat key, declared once by a plugin (tests/fixtures/plugins/tone.py) -----------------
ADMIN_STATIC = Path(__file__).resolve().parents[2] / "chatfn/channels/http/admin/static"
TONE_PLUGIN = str(Path(__file__).resolve().parents[1] / "fixtures" / "plugins" / "tone.py")
SHIP = {"match": {"chat_id": "group:ship*"}, "tone": "pirate"}


async def test_a_plugins_per_chat_key_is_a_rule_key_and_a_settings_line(tmp_path: Path) -> None:
    config = {"bot": {"admins": ["root"]}, "chats": [SHIP]}
    tb = TestBot(tmp_path, config=config, plugins=[TONE_PLUGIN])
    try:
        assert await tb.send("/greet", group="group:ship1") == ["Ahoy!"]
        assert await tb.send("/greet", group="group:dock") == ["Hello."]
        # its counter (`Plugin(metrics=...)`) is in /metrics and a worker's snapshot
        text = tb.bot.metrics.render()[0].decode()
        assert 'chatfn_tone_greetings_total{tone="pirate"} 1.0' in text
        snapshot = tb.bot.metrics.snapshot()["counters"]["chatfn_tone_greetings"]
        assert sorted(snapshot) == [["pirate", 1.0], ["plain", 1.0]]
        shown = "\n".join(await tb.send("/settings", group="group:ship1", sender="root"))
        assert "• tone: pirate (chats[0])" in shown
        shown = "\n".join(await tb.send("/settings", group="group:dock", sender="root"))
        assert "• tone: plain (default)" in shown
        # an override (the plugin's own command, as the console's) wins over the rule
        assert await tb.send("/tone loud", group="group:ship1", sender="root") == [
            "tone: plain, pirate"
        ]
        assert await tb.send("/tone plain", group="group:ship1", sender="root") == ["tone: plain"]
        assert await tb.send("/greet", group="group:ship1") == ["Hello."]
        shown = "\n".join(await tb.send("/settings", group="group:ship1", sender="root"))
        assert "• tone: plain (override by root at " in shown
        assert await tb.send("/tone pirate", group="group:dock", sender="alice") != ["tone: pirate"]
    finally:
        await tb.aclose()


def test_a_bad_value_of_a_plugins_key_names_it_in_the_config_check(tmp_path: Path) -> None:
    bad = {"chats": [{"match": {"chat_id": "group:x"}, "tone": "shouting"}]}
    with pytest.raises(ConfigError, match=r"chats\.0\.tone: Input should be 'plain' or 'pirate'"):
        parse_settings({**bad, "plugins": {"paths": [TONE_PLUGIN]}})
    with pytest.raises(ConfigError, match=r"chats\.0\.tone: unknown key"):
        parse_settings(bad)  # without the plugin, nobody declares the key
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({**bad, "plugins": {"paths": [TONE_PLUGIN]}}))
    report = run_checks(str(config), online=False)
    found = {c.name: c for c in report.checks}["config"]
    assert found.status == "fail" and "chats.0.tone" in found.detail


def test_a_key_the_core_or_another_plugin_declares_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from function_calls import ChatKey, Plugin\n"
        "plugin = Plugin('a', chat_keys=[ChatKey('language', str, 'x')])\n"
    )
    with pytest.raises(PluginLoadError, match="per-chat key 'language' is already the core's"):
        parse_settings({"plugins": {"paths": [str(tmp_path / "a.py")]}})


async def test_a_plugins_per_chat_key_is_in_the_consoles_chat_form(tmp_path: Path) -> None:
    password = "s3cret-pass"
    config = {
        "chats": [SHIP],
        "channels": {"http": {"token": "t"}},
        "admin": {"users": {"alice": {"password_hash": hash_password(password, n=2**8)}}},
    }
    tb = TestBot(tmp_path, config=config, plugins=[TONE_PLUGIN])
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    try:
        async with ClientSession(headers={"Authorization": "Bearer t"}) as api:
            body = {"chat_id": "group:ship1", "sender_id": "ann", "text": "/greet"}
            resp = await api.post(f"{base}/v1/messages", json=body)
            assert resp.status == 200, await resp.text()
        async with ClientSession(cookie_jar=CookieJar(unsafe=True)) as web:
            csrf = await _login(web, base, "alice", password)
            url = f"{base}/admin/api/chats/http/group:ship1"
            detail = await (await web.get(url)).json()
            assert detail["settings"]["tone"] == {
                "value": "pirate",
                "source": "chats[0]",
                "override": None,
            }
            assert "tone" in detail["editable"]
            assert detail["keys"]["tone"]["form"] == "choice"
            assert detail["choices"]["tone"] == ["plain", "pirate"]
            headers = {"X-CSRF-Token": csrf}
            resp = await web.patch(f"{url}/settings", json={"tone": "loud"}, headers=headers)
            error = await resp.json()
            assert resp.status == 400 and error["error"].startswith("tone: ")
            resp = await web.patch(f"{url}/settings", json={"tone": "plain"}, headers=headers)
            changed = await resp.json()
            assert resp.status == 200, changed
            assert changed["settings"]["tone"]["value"] == "plain"
            assert changed["settings"]["tone"]["override"]["value"] == "plain"
    finally:
        await channel.stop()
        await tb.aclose()


async def _login(web: ClientSession, base: str, user: str, password: str) -> str:
    page = await (await web.get(f"{base}/admin/login")).text()
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    form = {"username": user, "password": password, "csrf": token.group(1)}
    resp = await web.post(f"{base}/admin/login", data=form, allow_redirects=False)
    assert resp.status == 303
    session = await (await web.get(f"{base}/admin/api/session")).json()
    return str(session["csrf"])


# -- a console view: the reminders page is the reminders built-in's ------------------------------
def test_the_reminders_page_is_the_builtins_view_with_its_words() -> None:
    plugin = _plugin("reminders")
    [view] = plugin.console
    assert view.name == "reminders" and view.page is not None and view.page.is_file()
    assert {(r.method, r.path) for r in view.routes} == {
        ("GET", "reminders"),
        ("DELETE", "reminders/{id}"),
    }
    code = view.page.read_text("utf-8")
    used = set(re.findall(r'\bt\("([a-z_.]+)"', code))
    core = json.loads((ADMIN_STATIC / "i18n" / "en.json").read_text("utf-8"))
    for language in LANGUAGES:
        assert used - set(view.texts[language]) - set(core) == set(), language
    assert set(view.texts["en"]) == set(view.texts["zh"])
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in code
    # the console's helpers by their absolute paths (the module is served under /admin/api/)
    assert re.findall(r'from "([^"]+)"', code) == [
        "/admin/static/js/api.js",
        "/admin/static/js/dom.js",
        "/admin/static/js/i18n.js",
    ]
    # and the core's pages and words hold nothing of it
    assert not (ADMIN_STATIC / "js" / "pages" / "reminders.js").exists()
    assert not [k for k in core if k.startswith("reminders.") or k == "nav.reminders"]


def test_a_plugins_health_and_check_lines_come_through_its_declaration() -> None:
    mcp = _plugin("mcp")
    settings = parse_settings(
        {"mcp": {"servers": {"files": {"command": "no-such-command-here", "args": []}}}}
    )
    lines = mcp.checks(settings, online=False)
    assert [(x.name, x.status) for x in lines] == [("mcp files", "fail")]
    assert "no-such-command-here" in lines[0].detail or "mcp package" in lines[0].detail
    assert mcp.health_of(_NoServices(), detail=True) == {"mcp_servers": []}


def test_the_mcp_servers_list_is_drawn_from_the_builtins_view_with_its_words() -> None:
    """The console's overview and plugins page draw the MCP servers from the built-in's
    `HealthList`, in its words for every state a connection has; the core's words have none."""
    from typing import get_args

    from function_calls.builtins.mcp.client import State

    [view] = _plugin("mcp").console
    [servers] = view.health
    assert (servers.key, servers.good) == ("mcp_servers", ("connected",))
    assert view.page is None and not view.routes
    for language in ("en", "zh"):
        words = view.texts[language]
        assert servers.title in words and all(label in words for _, label in servers.columns)
        assert {f"{servers.states}{s}" for s in get_args(State)} <= set(words), language
    core = json.loads((ADMIN_STATIC / "i18n" / "en.json").read_text("utf-8"))
    assert not set(view.texts["en"]) & set(core)


def test_the_identity_of_mcp_clients_comes_through_the_builtins_declaration() -> None:
    """`mcp.expose` is read by the mcp built-in (`@plugin.program_caller`); the runtime asks
    the plugins, not the section."""
    from chatfn.runtime.exposure import program_caller
    from function_calls import ProgramCaller

    expose = {"as_user": "desk", "chat_id": "desk-chat", "admin": True}
    settings = parse_settings(
        {"mcp": {"expose": {**expose, "functions": {"exclude": ["reminder_*"]}}}}
    )
    expected = ProgramCaller(
        "desk", "desk-chat", admin=True, exclude=("reminder_*",), setting="mcp.expose"
    )
    assert _plugin("mcp").program_caller_of(settings) == expected
    assert program_caller(settings) == expected
    assert program_caller(parse_settings({})) == ProgramCaller(setting="mcp.expose")
    assert not expected.may_see("reminder_set") and expected.may_see("roll")


class _NoServices:
    def service(self, cls: type) -> None:
        return None


# -- tables: one mechanism for every plugin ------------------------------------------------------
NOTES_PLUGIN = """
from sqlalchemy import Column, Integer, MetaData, String, Table, text
from function_calls import Plugin, Tables

metadata = MetaData()
Table("notes_items", metadata, Column("id", Integer, primary_key=True), Column("body", String(80))
      {extra})

def add_colour(conn):
    conn.execute(text("ALTER TABLE notes_items ADD COLUMN colour VARCHAR(16)"))

plugin = Plugin("notes", tables=Tables(metadata, version={version}, migrations={{2: add_colour}}))
"""


def _columns(engine: Any, table: str) -> list[str]:
    with engine.connect() as conn:
        return [row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table})")]


async def test_a_plugins_tables_are_created_and_migrated_by_the_runtime(tmp_path: Path) -> None:
    plugin = tmp_path / "notes.py"
    db = {"storage": {"url": f"sqlite:///{tmp_path / 'bot.db'}"}}
    plugin.write_text(NOTES_PLUGIN.format(version=1, extra=""))
    tb = TestBot(tmp_path, config=db, plugins=[str(plugin)])
    run, engine = tb.bot.storage.run, tb.bot.storage.engine
    assert await run(_columns, engine, "notes_items") == ["id", "body"]
    assert await run(stored_version, engine, "notes") == 1
    assert await run(stored_version, engine, "reminders") == 1  # the built-ins' the same way
    await tb.aclose()
    # version 2: its migration runs once, before the tables it declares are made
    code = NOTES_PLUGIN.format(version=2, extra=', Column("colour", String(16))')
    plugin.write_text(code)
    for _ in range(2):
        tb = TestBot(tmp_path, config=db, plugins=[str(plugin)])
        run, engine = tb.bot.storage.run, tb.bot.storage.engine
        assert await run(_columns, engine, "notes_items") == ["id", "body", "colour"]
        assert await run(stored_version, engine, "notes") == 2
        await tb.aclose()


def test_a_plugins_metric_cannot_take_a_core_name_or_another_shape() -> None:
    metrics = Metrics()
    core = metrics.messages_in
    with pytest.raises(ValueError, match="declared with labels"):
        metrics.declare(core.name, "mine", ["x"])
    with pytest.raises(ValueError, match="chatfn_<plugin>_"):
        metrics.declare("greetings", "no prefix", [])
    mine = metrics.declare("chatfn_doors_seen", "seen", ["kind"])
    assert metrics.declare("chatfn_doors_seen", "seen", ["kind"]) is mine
    assert metrics.declared("chatfn_doors_seen") is mine
    with pytest.raises(KeyError):
        metrics.declared("chatfn_doors_never")


async def test_only_a_key_declared_overridable_can_be_overridden(tmp_path: Path) -> None:
    (tmp_path / "sneaky.py").write_text(
        "from pydantic import BaseModel\n"
        "from function_calls import FunctionResult, MessageContext, tool_function\n"
        "class Args(BaseModel):\n"
        "    key: str\n"
        "@tool_function(description='x', chat_admin=True)\n"
        "async def sneak(ctx: MessageContext, args: Args) -> FunctionResult:\n"
        "    try:\n"
        "        await ctx.set_chat_override(args.key, '3')\n"
        "    except ValueError as exc:\n"
        "        return FunctionResult(messages=[str(exc)])\n"
        "    return FunctionResult(messages=['set'])\n"
    )
    config = {"bot": {"admins": ["root"]}}
    tb = TestBot(tmp_path, config=config, plugins=[str(tmp_path / "sneaky.py")])
    try:
        said = await tb.send("/sneak history_size", sender="root")
        assert said == ["history_size: not a per-chat key a chat's admins may override"]
        assert await tb.send("/sneak colour", sender="root") == [
            "colour: not a per-chat key a chat's admins may override"
        ]
        assert await tb.send("/sneak language", sender="root") == ["language: one of en, zh"]
        assert await tb.send("/sneak persona", sender="root") == ["set"]
    finally:
        await tb.aclose()
