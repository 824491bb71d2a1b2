"""The market's whole path (issue 37, "How it is tested"), without a browser, in the services lane
that .ci/run runs (ten pip runs and a bot process: about two minutes on 2 cores, too long for
README's lane): `chatfn plugin new` writes a plugin, pip builds its wheel (offline), the wheels
sit in a folder pip reads (`plugins.package_index`: `--no-index --find-links`) and the market's
index JSON (each wheel's sha256) is served over HTTP by the test. A bot runs in a venv of its
own (`chatfn run --channel http`, tests/channels/http/market_kit.py) with an OpenAI-compatible
model the test serves; an owner installs the plugin through the console's API; its function
answers a model's call and a slash command without a restart; the upgrade to a second version
(first listed with a wrong hash: refused) answers the next message; it is switched off for one
chat, then removed. A non-owner's install is refused and audited."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from chatfn.channels.http.admin.passwords import hash_password
from chatfn.cli import main
from tests.channels.http.admin.conftest import Admin
from tests.channels.http.market_kit import TOKEN, Bot, serve_folder
from tests.chatfn.test_plugin_cli import Venv, clean_env
from tests.kit.ports import free_port

pytestmark = pytest.mark.services

PASSWORD = "owner-secret"


class ModelHandler(BaseHTTPRequestHandler):
    """`POST /v1/chat/completions`: a user message saying "greet" is answered with a call of
    `demo_hello` (who=Model); the function's result is said back; anything else: "plain"."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = body["messages"][-1]
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        message: dict[str, Any] = {"role": "assistant", "content": "plain"}
        if last["role"] == "tool":
            message["content"] = f"model: {last['content']}"
        elif "greet" in str(last.get("content")) and "demo_hello" in tools:
            call = {"name": "demo_hello", "arguments": json.dumps({"who": "Model"})}
            message = {"role": "assistant", "content": None, "tool_calls": []}
            message["tool_calls"].append({"id": "call_1", "type": "function", "function": call})
        reason = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        out = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": usage,
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def build(source: Path, where: Path, wheels: Path) -> Path:
    """The wheel of the package at `source` (built from a copy: setuptools leaves an
    .egg-info where it builds), offline."""
    shutil.copytree(source, where)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--wheel-dir", str(wheels), str(where)],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = [w for w in wheels.glob("*.whl") if w.name.split("-")[1] == where.name]
    return wheel


def index(wheels: list[tuple[Path, str]]) -> dict[str, Any]:
    """The market's index: plugin demo, each wheel with the sha256 given."""
    versions = [
        {
            "version": w.name.split("-")[1],
            "chatfn": "",
            "permissions": [],
            "files": [{"filename": w.name, "sha256": sha}],
        }
        for w, sha in wheels
    ]
    plugin = {
        "name": "demo",
        "kind": "package",
        "distribution": "chatfn-demo",
        "summary": "Greets people.",
        "tags": ["greeting"],
        "versions": versions,
    }
    return {"format": 1, "plugins": [plugin]}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def market(tmp_path: Path) -> Iterator[tuple[Bot, Path, list[Path], str]]:
    assert main(["plugin", "new", "demo", "--dir", str(tmp_path)]) == 0
    source = tmp_path / "chatfn-demo"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    first = build(source, tmp_path / "0.1.0", wheels)
    for file, old, new in (
        ("pyproject.toml", 'version = "0.1.0"', 'version = "0.2.0"'),
        ("chatfn_demo/__init__.py", 'f"Hello, ', 'f"Hello again, '),
    ):
        path = source / file
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    second = build(source, tmp_path / "0.2.0", wheels)
    served = tmp_path / "served"
    served.mkdir()
    (served / "index.json").write_text(json.dumps(index([(first, sha256(first))])))
    index_server, index_base = serve_folder(served)
    model_server = ThreadingHTTPServer(("127.0.0.1", 0), ModelHandler)
    threading.Thread(target=model_server.serve_forever, daemon=True).start()
    owner_hash = hash_password(PASSWORD, n=2**8)
    config = {
        "models": {
            "main": {
                "provider": "openai",
                "model": "fake-1",
                "api_key": "sk-test",
                "base_url": f"http://127.0.0.1:{model_server.server_address[1]}/v1",
                "max_retries": 0,
            }
        },
        "storage": {"url": "sqlite:///bot.db"},
        "bot": {"fetch": {"allow_hosts": ["127.0.0.1"]}},
        "channels": {"http": {"token": TOKEN, "port": free_port()}},
        "plugins": {
            "paths": [],
            "package_index": "wheels",
            "installer": "pip",  # uv cannot see the chatfn this venv inherits
            "index_url": f"{index_base}/index.json",
        },
        "admin": {
            "users": {
                "olive": {"password_hash": owner_hash, "role": "owner"},
                "carl": {"password_hash": owner_hash},
            },
            "allow_plugin_install": True,
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    venv = Venv(tmp_path / "venv", tmp_path / "config.yaml")
    bot = Bot(tmp_path, venv, config["channels"]["http"]["port"])
    try:
        yield bot, served, [first, second], f"{index_base}/index.json"
    finally:
        bot.stop()
        index_server.shutdown()
        model_server.shutdown()


async def login(bot: Bot, user: str) -> Admin:
    admin = Admin(bot.url)
    assert await admin.login(user, PASSWORD) == 303
    return admin


async def test_new_plugin_published_installed_used_upgraded_switched_and_removed(
    market: tuple[Bot, Path, list[Path], str],
) -> None:
    bot, served, (first, second), url = market
    olive, carl = await login(bot, "olive"), await login(bot, "carl")
    try:
        await walk(bot, served, first, second, url, olive, carl)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- bot log:\n{bot.tail()}") from exc
    finally:
        await olive.close()
        await carl.close()


async def walk(
    bot: Bot, served: Path, first: Path, second: Path, url: str, olive: Admin, carl: Admin
) -> None:
    status, found = await olive.get("/admin/api/market?q=greeting")
    assert status == 200 and found["index_url"] == url, found
    [row] = found["plugins"]
    assert (row["name"], row["latest"], row["installed"]) == ("demo", "0.1.0", None)
    assert bot.say("room", "/demo_hello who=Ada") != ["Hello, Ada!"]

    # Not an owner: refused before anything is fetched, and audited.
    ask = {"distribution": "chatfn-demo", "version": "0.1.0"}
    refused = await carl.send("POST", "/admin/api/market/plan", ask)
    assert refused[0] == 403, refused

    # The owner: the confirmation, then the yes; used at once, no restart.
    status, plan = await olive.send("POST", "/admin/api/market/plan", ask)
    assert status == 200, plan
    assert (plan["package"], plan["version"], plan["sha256"]) == (
        "chatfn-demo",
        "0.1.0",
        sha256(first),
    )
    assert f"index:       listed in {url}, sha256 matches" in plan["lines"]
    status, done = await olive.send(
        "POST", "/admin/api/market/confirm", {"token": plan["token"], "yes": True}
    )
    assert status == 200 and done["installed"] is True, done
    assert done["changes"] == [{"plugin": "demo", "done": "loaded", "restart": None}]
    assert bot.say("room", "/demo_hello who=Ada") == ["Hello, Ada!"]
    assert bot.say("room", "please greet") == ["Hello, Model!"]
    listed = (await olive.get("/admin/api/plugins"))[1]["plugins"]
    demo = next(p for p in listed if p["name"] == "demo")
    assert demo["meta"]["version"] == "0.1.0" and demo["functions"] == ["demo_hello"]

    # 0.2.0 published with a hash that is not its wheel's: refused, 0.1.0 still answers.
    bad = index([(first, sha256(first)), (second, "0" * 64)])
    (served / "index.json").write_text(json.dumps(bad))
    upgrade = {"distribution": "chatfn-demo", "version": "0.2.0", "upgrade": True}
    wrong = await olive.send("POST", "/admin/api/market/plan", upgrade)
    assert wrong[0] == 409 and "is not one plugins.index_url lists" in wrong[1]["error"], wrong
    assert bot.say("room", "/demo_hello who=Ada") == ["Hello, Ada!"]
    # With its true hash: the upgrade answers the next message.
    good = index([(first, sha256(first)), (second, sha256(second))])
    (served / "index.json").write_text(json.dumps(good))
    status, plan = await olive.send("POST", "/admin/api/market/plan", upgrade)
    assert status == 200 and plan["installed"] == "0.1.0", plan
    assert "upgrade chatfn-demo 0.1.0 -> 0.2.0" in plan["lines"]
    status, done = await olive.send(
        "POST", "/admin/api/market/confirm", {"token": plan["token"], "yes": True}
    )
    assert status == 200 and done["changes"][0]["done"] == "reloaded", done
    assert bot.say("room", "/demo_hello who=Ada") == ["Hello again, Ada!"]
    assert bot.say("room", "please greet") == ["Hello again, Model!"]

    # Off in one chat only.
    assert bot.say("other", "/demo_hello who=Bo") == ["Hello again, Bo!"]
    off = {"chat": "http:room", "on": False}
    status, out = await olive.send("POST", "/admin/api/plugins/demo/chat", off)
    assert status == 200 and out["on"] is False, out
    assert bot.say("room", "please greet") == ["plain"]
    assert bot.say("room", "/demo_hello who=Ada") != ["Hello again, Ada!"]
    assert bot.say("other", "please greet") == ["Hello again, Model!"]

    # Removed: its command is gone for the next message.
    status, gone = await olive.send("DELETE", "/admin/api/market/chatfn-demo")
    assert status == 200 and gone["removed"] is True, gone
    assert bot.say("other", "/demo_hello who=Bo") != ["Hello again, Bo!"]
    assert "demo" not in [p["name"] for p in (await olive.get("/admin/api/plugins"))[1]["plugins"]]

    entries = (await olive.get("/admin/api/audit?limit=100"))[1]["entries"]
    mine = [(e["user"], e["action"]) for e in entries]
    for expected in (
        ("olive", "plugin.install"),
        ("olive", "plugin.upgrade.refused"),
        ("olive", "plugin.upgrade"),
        ("olive", "plugin.chat_off"),
        ("olive", "plugin.remove"),
        ("carl", "plugin.install.refused"),
    ):
        assert expected in mine, (expected, mine)
