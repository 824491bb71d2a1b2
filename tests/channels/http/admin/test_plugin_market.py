"""The console's Plugins page over HTTP (issue 37.4), against a real bot with a plugin file: on
and off for the bot and for one chat, its settings form (validated as the config file is,
secrets write-only, written to the file), hot reload with a message in flight (answered once,
with the plugin as it was when its turn began; the next message sees the change), the market's
search from a local index JSON server, and the install rules: owners only, off unless
`admin.allow_plugin_install`, only versions and hashes the index lists (pip reads a local folder
of wheels: `--no-index --find-links`; nothing is installed here: the venv test in
tests/channels/http/test_admin_market.py installs)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from aiohttp import ClientSession, web

from chatfn.testing import ScriptedModel
from providers.scripted import call, say
from tests.channels.http.admin.conftest import (
    HASHES,
    PASSWORDS,
    TOKEN,
    MakeConsole,
    admin_config,
)
from tests.chatfn.test_plugin_cli import hello
from tests.kit import bound_port, until, wait_event

GREETER = """
from pydantic import BaseModel, Field, SecretStr

from function_calls import FunctionResult, MessageContext, Plugin, tool_function


class GreeterSettings(BaseModel):
    greeting: str = "hello"
    times: int = Field(default=1, ge=1, le=5)
    api_key: SecretStr | None = None


plugin = Plugin(
    "greeter",
    settings=GreeterSettings,
    description="Greets people.",
    version="1.0",
    permissions=("model",),
)


@tool_function(description="Greet someone.")
async def greet(ctx: MessageContext) -> FunctionResult:
    s = ctx.settings(GreeterSettings)
    key = "key" if s.api_key is not None else "no key"
    return FunctionResult(messages=[" ".join([s.greeting] * s.times) + f" ({key})"])
"""

# carol: every chat, not an owner (alice's password and hash, to keep the tests quick).
PASSWORDS.setdefault("carol", PASSWORDS["alice"])


class Held(ScriptedModel):
    """Calls `greet` for a message saying "greet", after `gate` for one saying "hold"; says
    "done" after a function's result, "plain" otherwise; every request kept."""

    def __init__(self) -> None:
        super().__init__([self.step], repeat_last=True, name="main")
        self.gate = asyncio.Event()
        self.holding = asyncio.Event()
        self.shown: list[str] = []

    def step(self, messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return say("done")
        return call("greet") if "greet" in (last.content or "") else say("plain")

    async def complete(self, messages: Any, tools: Any = None) -> Any:
        self.shown = [t.name for t in tools or []]
        if "hold" in (messages[-1].content or ""):
            self.holding.set()
            await self.gate.wait()
        return await super().complete(messages, tools)

    def offered(self) -> list[str]:
        """The functions the model was shown in its last request."""
        return self.shown


def config(tmp_path: Path, **admin: Any) -> dict[str, Any]:
    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    (folder / "greeter.py").write_text(GREETER)
    data = admin_config(plugins={"paths": [str(folder)]})
    users = data["admin"]["users"]
    users["alice"]["role"] = "owner"
    users["carol"] = {"password_hash": HASHES["alice"]}  # every chat, not an owner
    data["admin"].update(admin)
    return data


async def start(make: MakeConsole, tmp_path: Path, model: Any = None, **admin: Any) -> Any:
    data = config(tmp_path, **admin)
    c = await make(model or Held(), data, plugins=data["plugins"]["paths"])
    # The bot's config file (TestBot reads a mapping): the console writes its changes here.
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(data))
    c.tb.bot.settings._config_file = file
    return c


async def test_the_plugins_page_lists_state_metadata_and_market_rights(
    console: MakeConsole, tmp_path: Path
) -> None:
    c = await start(console, tmp_path)
    alice, carol = await c.client("alice"), await c.client("carol")
    status, body = await alice.get("/admin/api/plugins")
    assert status == 200
    row = next(p for p in body["plugins"] if p["name"] == "greeter")
    assert row["state"] == "on" and row["settings"] is True and row["reload"] is True
    assert row["meta"]["permissions"] == ["model"] and row["functions"] == ["greet"]
    assert body["market"] == {
        "index_url": body["market"]["index_url"],
        "allow_install": False,
        "owner": True,
    }
    assert body["market"]["index_url"].endswith("plugins/index.json")
    assert (await carol.get("/admin/api/plugins"))[1]["market"]["owner"] is False
    bob = await c.client("bob")  # a chats: scope: not this page
    assert (await bob.get("/admin/api/plugins"))[0] == 403
    assert (await bob.send("POST", "/admin/api/plugins/greeter/state", {"on": False}))[0] == 403


async def test_off_and_on_for_the_bot_take_effect_for_the_next_message_not_the_one_in_flight(
    console: MakeConsole, tmp_path: Path
) -> None:
    model = Held()
    c = await start(console, tmp_path, model)
    alice = await c.client("alice")
    # A turn in flight: the model was shown greet and will call it after the switch.
    flight = asyncio.create_task(c.chat("room", "hold and greet"))
    await wait_event(model.holding, message="the held turn never reached the model")
    assert "greet" in model.offered()
    status, body = await alice.send("POST", "/admin/api/plugins/greeter/state", {"on": False})
    assert status == 200 and body["done"] == "off" and body["restart"] is None
    # A plugin file obeys plugins.disabled: the choice is written there, off after a restart
    assert body["kept"] is True
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["plugins"]["disabled"] == [
        "greeter"
    ]
    model.gate.set()
    answered = await flight
    texts = [m["text"] for m in answered["replies"]]
    assert texts == ["hello (no key)"], texts  # once, with greet as it was
    # The next message: greet is neither offered nor callable.
    await c.chat("room", "greet please")
    assert "greet" not in model.offered()
    listed = (await alice.get("/admin/api/plugins"))[1]["plugins"]
    row = next(p for p in listed if p["name"] == "greeter")
    assert row["state"] == "off" and "console" in row["status"]
    await c.chat("room", "slash")
    on = await alice.send("POST", "/admin/api/plugins/greeter/state", {"on": True})
    assert on[0] == 200 and on[1]["done"] == "on" and on[1]["kept"] is True
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["plugins"]["disabled"] == []
    again = await c.chat("room", "greet again")
    assert [m["text"] for m in again["replies"]] == ["hello (no key)"]
    users = [m["text"] for m in await history(c, "room") if m["role"] == "user"]
    assert users == ["hold and greet", "greet please", "slash", "greet again"]  # none lost
    audit = (await alice.get("/admin/api/audit"))[1]["entries"]
    actions = [e["action"] for e in audit]
    assert "plugin.off" in actions and "plugin.on" in actions


async def history(c: Any, chat_id: str) -> list[dict[str, Any]]:
    async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        resp = await http.get(f"{c.base}/v1/history", params={"chat_id": chat_id})
        assert resp.status == 200
        return list((await resp.json())["messages"])


async def test_settings_form_validates_writes_the_file_keeps_secrets_and_applies_next_message(
    console: MakeConsole, tmp_path: Path
) -> None:
    model = Held()
    c = await start(console, tmp_path, model)
    alice = await c.client("alice")
    status, form = await alice.get("/admin/api/plugins/greeter/settings")
    assert status == 200 and form["section"] == "greeter"
    assert form["schema"]["properties"]["times"]["maximum"] == 5
    assert form["values"] == {"greeting": "hello", "times": 1, "api_key": {"set": False}}
    assert form["secret"] == ["api_key"]
    # Validated as the config file is: the key named, nothing written.
    bad = await alice.send("PUT", "/admin/api/plugins/greeter/settings", {"values": {"times": 9}})
    assert bad[0] == 400 and "greeter.times" in bad[1]["error"], bad
    assert "times: 9" not in (tmp_path / "config.yaml").read_text()
    unknown = await alice.send("PUT", "/admin/api/plugins/greeter/settings", {"values": {"x": 1}})
    assert unknown[0] == 400 and unknown[1]["field"] == "x"
    flight = asyncio.create_task(c.chat("room", "hold and greet"))
    await wait_event(model.holding, message="the held turn never reached the model")
    new = {"greeting": "ahoy", "times": 2, "api_key": "s3cret-value"}
    status, body = await alice.send("PUT", "/admin/api/plugins/greeter/settings", {"values": new})
    assert status == 200 and body["done"] == "configured" and body["restart"] is None
    assert "s3cret-value" not in json.dumps(body)
    assert body["form"]["values"]["api_key"] == {"set": True}
    written = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert written["greeter"] == new and written["models"]  # the rest of the file kept
    model.gate.set()
    await flight
    again = await c.chat("room", "greet now")
    assert again["replies"][0]["text"] == "ahoy ahoy (key)"
    # A secret left out keeps its value.
    kept = await alice.send(
        "PUT", "/admin/api/plugins/greeter/settings", {"values": {"greeting": "hi", "api_key": ""}}
    )
    assert kept[0] == 200
    written = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert (
        written["greeter"]["api_key"] == "s3cret-value" and written["greeter"]["greeting"] == "hi"
    )
    page = json.dumps((await alice.get("/admin/api/plugins/greeter/settings"))[1])
    assert "s3cret-value" not in page
    audit = (await alice.get("/admin/api/audit"))[1]["entries"]
    configured = [e for e in audit if e["action"] == "plugin.configure"]
    assert configured and "s3cret" not in json.dumps(configured)


async def test_off_for_one_chat_only(console: MakeConsole, tmp_path: Path) -> None:
    model = Held()
    c = await start(console, tmp_path, model)
    alice = await c.client("alice")
    await c.chat("one", "hi")
    await c.chat("two", "hi")
    body = {"chat": "http:one", "on": False}
    status, out = await alice.send("POST", "/admin/api/plugins/greeter/chat", body)
    assert status == 200 and out == {"plugin": "greeter", "chat": "http:one", "on": False}
    state = await alice.get("/admin/api/plugins/greeter/chat?chat=http:one")
    assert state[1]["on"] is False
    assert (await alice.get("/admin/api/plugins/greeter/chat?chat=http:two"))[1]["on"] is True
    await c.chat("one", "greet")
    assert "greet" not in model.offered()
    await c.chat("two", "greet")
    assert "greet" in model.offered()
    chat = (await alice.get("/admin/api/chats/http/one"))[1]
    assert "greet" in chat["settings"]["functions"]["value"]["disabled"]
    back = await alice.send("POST", "/admin/api/plugins/greeter/chat", {**body, "on": True})
    assert back[0] == 200
    await c.chat("one", "greet")
    assert "greet" in model.offered()


async def index_server(index: dict[str, Any]) -> tuple[web.AppRunner, str]:
    """The market's index, served as a JSON document the way a static host serves it."""

    async def serve(request: web.Request) -> web.Response:
        return web.json_response(index)

    app = web.Application()
    app.router.add_get("/index.json", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{bound_port(site)}/index.json"


def entry(wheel: Path | None, version: str, sha256: str | None = None) -> dict[str, Any]:
    digest = sha256 or hashlib.sha256(wheel.read_bytes()).hexdigest()  # type: ignore[union-attr]
    return {
        "name": "hello",
        "kind": "package",
        "distribution": "chatfn-hello",
        "summary": "Says hello.",
        "author": "tests",
        "tags": ["greeting"],
        "versions": [
            {
                "version": version,
                "chatfn": ">=0.1",
                "permissions": ["network", "model"],
                "files": [
                    {"filename": f"chatfn_hello-{version}-py3-none-any.whl", "sha256": digest}
                ],
            }
        ],
    }


async def test_market_search_and_the_install_rules(console: MakeConsole, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good = hello(wheels, "1.0")
    hello(wheels, "2.0")
    listed = entry(good, "1.0")
    listed["versions"].append(entry(None, "2.0", "0" * 64)["versions"][0])  # a wrong hash
    runner, url = await index_server({"format": 1, "plugins": [listed]})
    try:
        data_extra = {"allow_plugin_install": False}
        c = await start(console, tmp_path, **data_extra)
        c.tb.bot.settings.plugins.__dict__.update(index_url=url, package_index=str(wheels))
        # The index is on 127.0.0.1, an address chatfn.common.fetch refuses unless allowed.
        c.tb.bot.settings.bot.fetch.__dict__["allow_hosts"] = ["127.0.0.1"]
        alice, carol = await c.client("alice"), await c.client("carol")
        found = (await alice.get("/admin/api/market?q=greeting"))[1]
        assert [p["name"] for p in found["plugins"]] == ["hello"] and found["index_url"] == url
        assert found["plugins"][0]["latest"] == "2.0" and found["plugins"][0]["installed"] is None
        assert (await alice.get("/admin/api/market?q=nothing-like-it"))[1]["plugins"] == []
        ask = {"distribution": "chatfn-hello", "version": "1.0"}
        # admin.allow_plugin_install off: nobody, not even an owner.
        off = await alice.send("POST", "/admin/api/market/plan", ask)
        assert off[0] == 403 and off[1]["field"] == "allow_plugin_install"
        c.tb.bot.settings.admin.__dict__["allow_plugin_install"] = True
        # Not an owner: refused before anything is fetched.
        assert (await carol.send("POST", "/admin/api/market/plan", ask))[0] == 403
        assert (await carol.send("DELETE", "/admin/api/market/chatfn-hello"))[0] == 403
        assert (await carol.send("POST", "/admin/api/market/confirm", {"token": "x"}))[0] == 403
        # A version whose file hash the index does not list: refused, nothing installed.
        wrong = await alice.send("POST", "/admin/api/market/plan", {**ask, "version": "2.0"})
        assert wrong[0] == 409 and "is not one plugins.index_url lists" in wrong[1]["error"]
        # A version the index does not list at all: refused by the console.
        hello(wheels, "3.0")
        unlisted = await alice.send("POST", "/admin/api/market/plan", {**ask, "version": "3.0"})
        assert unlisted[0] == 409 and "does not list it" in unlisted[1]["error"]
        # The listed one: the command line's confirmation, waiting for a yes.
        status, plan = await alice.send("POST", "/admin/api/market/plan", ask)
        assert status == 200, plan
        assert plan["sha256"] == hashlib.sha256(good.read_bytes()).hexdigest()
        assert plan["permissions"] == ["model", "network"] and plan["version"] == "1.0"
        assert f"sha256:      {plan['sha256']}" in plan["lines"]
        assert any(line.startswith("index:       listed in") for line in plan["lines"])
        # Another user cannot give alice's yes; a no installs nothing.
        carol_yes = await carol.send("POST", "/admin/api/market/confirm", {"token": plan["token"]})
        assert carol_yes[0] == 403
        no = await alice.send("POST", "/admin/api/market/confirm", {"token": plan["token"]})
        assert no == (200, {"installed": False})
        gone = await alice.send(
            "POST", "/admin/api/market/confirm", {"token": plan["token"], "yes": True}
        )
        assert gone[0] == 404  # a token is used once
        audit = (await alice.get("/admin/api/audit?limit=50"))[1]["entries"]
        actions = [e["action"] for e in audit]
        for action in ("plugin.install.refused", "plugin.install.asked", "plugin.install.declined"):
            assert action in actions, actions
        refused = [e for e in audit if e["action"] == "plugin.install.refused"]
        assert {e["user"] for e in refused} == {"alice", "carol"}  # a non-owner's too
        carols = [e["detail"] for e in refused if e["user"] == "carol"]
        assert carols and all("role: owner" in d["why"] for d in carols), carols
        assert carols[0]["asked"] == {"distribution": "chatfn-hello", "version": "1.0"}
    finally:
        await runner.cleanup()


async def test_a_plugin_that_cannot_reload_says_a_restart_is_needed(
    console: MakeConsole, tmp_path: Path
) -> None:
    c = await start(console, tmp_path)
    loaded = c.tb.bot.settings.plugins_loaded
    greeter = next(p for p in loaded if p.name == "greeter")
    greeter.plugin.reload = False
    alice = await c.client("alice")
    status, body = await alice.send(
        "PUT", "/admin/api/plugins/greeter/settings", {"values": {"greeting": "yo"}}
    )
    assert status == 200 and body["done"] == "saved"
    assert "cannot reload" in body["restart"]
    await until(lambda: "yo" in (tmp_path / "config.yaml").read_text())
    row = next(
        p for p in (await alice.get("/admin/api/plugins"))[1]["plugins"] if p["name"] == "greeter"
    )
    assert "restart" in row["restart"]


async def test_a_new_version_swapped_in_mid_turn_answers_from_the_next_message(
    console: MakeConsole, tmp_path: Path
) -> None:
    """What an upgrade does once pip is done (plugin_reload.PluginSwitch._swap): the turn in
    flight runs the version it was shown, once; the next message runs the new one."""
    from chatfn.runtime.plugins import load_plugin_files

    model = Held()
    c = await start(console, tmp_path, model)
    newer = tmp_path / "v2"
    newer.mkdir()
    (newer / "greeter.py").write_text(GREETER.replace('" ".join(', '"v2 " + " ".join('))
    [new] = load_plugin_files([str(newer)], tmp_path)
    switch = c.tb.bot.api_host.console.plugin_page.switch
    old = switch.loaded("greeter")
    flight = asyncio.create_task(c.chat("room", "hold and greet"))
    await wait_event(model.holding, message="the held turn never reached the model")
    switch._swap(old, new)
    model.gate.set()
    assert [r["text"] for r in (await flight)["replies"]] == ["hello (no key)"]
    assert [r["text"] for r in (await c.chat("room", "greet"))["replies"]] == ["v2 hello (no key)"]
    assert switch.loaded("greeter") is new
    users = [m["text"] for m in await history(c, "room") if m["role"] == "user"]
    assert users == ["hold and greet", "greet"]


async def test_the_market_installs_a_plugin_file_the_index_lists(
    console: MakeConsole, tmp_path: Path
) -> None:
    """A `kind: file` plugin (the project's own index lists its example so): its bytes read
    beside the index, the sha256 checked, written into the first folder of plugins.paths after
    the yes, and loaded for the next message; never over a file of the operator's own."""
    source = (Path(__file__).resolve().parents[4] / "plugins" / "example.py").read_bytes()
    served = {"dice.py": b"# tampered\n" + source, "mine.py": b"x = 1\n"}

    def listed(name: str, data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        file = {"filename": f"{name}.py", "sha256": digest, "url": f"{name}.py"}
        version = {"version": "1.0", "chatfn": "", "files": [file]}
        return {"name": name, "kind": "file", "summary": name, "versions": [version]}

    index = {"format": 1, "plugins": [listed("dice", source), listed("mine", b"x = 1\n")]}

    async def serve(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "index.json":
            return web.json_response(index)
        return web.Response(body=served[name], content_type="text/x-python")

    app = web.Application()
    app.router.add_get("/{name}", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        c = await start(console, tmp_path, allow_plugin_install=True)
        url = f"http://127.0.0.1:{bound_port(site)}/index.json"
        c.tb.bot.settings.plugins.__dict__.update(index_url=url)
        c.tb.bot.settings.bot.fetch.__dict__["allow_hosts"] = ["127.0.0.1"]
        alice, carol = await c.client("alice"), await c.client("carol")
        found = (await alice.get("/admin/api/market?q=dice"))[1]["plugins"]
        assert [(p["name"], p["kind"], p["installed"]) for p in found] == [("dice", "file", None)]
        assert (await carol.send("POST", "/admin/api/market/plan", {"name": "dice"}))[0] == 403
        # The bytes served are not the ones the index lists: refused, nothing written.
        wrong = await alice.send("POST", "/admin/api/market/plan", {"name": "dice"})
        assert wrong[0] == 409 and "is not the one plugins.index_url lists" in wrong[1]["error"]
        target = tmp_path / "plugins" / "dice.py"
        assert not target.exists()
        served["dice.py"] = source
        status, plan = await alice.send("POST", "/admin/api/market/plan", {"name": "dice"})
        assert status == 200, plan
        assert plan["sha256"] == hashlib.sha256(source).hexdigest() and plan["file"] == "dice.py"
        assert f"plugin file: dice 1.0 -> {target}" in plan["lines"]
        assert not target.exists()  # not before the yes
        yes = {"token": plan["token"], "yes": True}
        status, done = await alice.send("POST", "/admin/api/market/confirm", yes)
        assert status == 200 and done["changes"][0]["done"] == "loaded", done
        assert target.read_bytes() == source
        answer = await c.chat("room", "/roll_dice count=2")
        assert answer["replies"][0]["text"].startswith("🎲 2d6"), answer
        again = (await alice.get("/admin/api/market?q=dice"))[1]["plugins"]
        assert again[0]["installed"] == "1.0"
        # A file of the operator's own is never overwritten.
        (tmp_path / "plugins" / "mine.py").write_text("# my own\n")
        own = await alice.send("POST", "/admin/api/market/plan", {"name": "mine"})
        assert own[0] == 409 and "never overwritten" in own[1]["error"]
        # Removed from the market: the owner only; never a file of the operator's own (nor
        # one they changed), only a version the index lists; gone for the next message.
        assert (await carol.send("DELETE", "/admin/api/market/dice"))[0] == 403
        mine = await alice.send("DELETE", "/admin/api/market/mine")
        assert mine[0] == 409 and "remove it by hand" in mine[1]["error"], mine
        assert (tmp_path / "plugins" / "mine.py").exists()
        assert (await alice.send("DELETE", "/admin/api/market/nothing_here"))[0] == 404
        status, gone = await alice.send("DELETE", "/admin/api/market/dice")
        assert status == 200 and gone["removed"] is True and gone["version"] == "1.0", gone
        assert gone["changes"] == [{"plugin": "dice", "done": "removed", "restart": None}]
        assert not target.exists()
        answer = await c.chat("room", "/roll_dice count=2")
        assert answer["replies"][0]["text"].startswith("Unknown command"), answer
        actions = [
            e["action"] for e in (await alice.get("/admin/api/audit?limit=50"))[1]["entries"]
        ]
        assert "plugin.install" in actions and "plugin.install.refused" in actions
        assert "plugin.remove" in actions and "plugin.remove.refused" in actions
    finally:
        await runner.cleanup()


async def test_an_index_its_schema_refuses_is_one_error_and_nothing_is_installed(
    console: MakeConsole, tmp_path: Path
) -> None:
    """A served index that breaks plugins/index.schema.json: the market's search and an
    install plan each answer one error naming the index and its first bad field; nothing is
    written; the bot goes on answering."""
    file = {"filename": "dice.py", "sha256": "abc", "url": "dice.py"}  # not a sha256
    version = {"version": "1.0", "chatfn": "", "files": [file]}
    broken = {"name": "dice", "kind": "file", "summary": "dice", "versions": [version]}
    runner, url = await index_server({"format": 1, "plugins": [broken]})
    try:
        c = await start(console, tmp_path, allow_plugin_install=True)
        c.tb.bot.settings.plugins.__dict__.update(index_url=url)
        c.tb.bot.settings.bot.fetch.__dict__["allow_hosts"] = ["127.0.0.1"]
        alice = await c.client("alice")
        where = "plugins[0].versions[0].files[0].sha256"
        status, body = await alice.get("/admin/api/market?q=dice")
        assert status == 502, body
        assert body["error"].startswith(f"plugins.index_url {url}: not a valid plugin index at ")
        assert where in body["error"], body
        status, body = await alice.send("POST", "/admin/api/market/plan", {"name": "dice"})
        assert status == 409 and where in body["error"], body
        assert not (tmp_path / "plugins" / "dice.py").exists()
        answer = await c.chat("room", "greet")  # the bot still runs, its plugin file too
        assert answer["replies"][0]["text"] == "hello (no key)", answer
    finally:
        await runner.cleanup()
