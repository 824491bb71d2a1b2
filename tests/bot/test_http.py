"""`python bot.py --channel http` as a subprocess, talked to over HTTP."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import aiohttp
from aiohttp import web

from tests.bot.conftest import PYTHON, ROOT, free_port, write_config
from tests.fakes.cassette import ReplayServer, openai_chat_response
from tests.kit import serve, until

TOKEN = "change-me-e2e"


async def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Until the bot at `url` answers /healthz; fails at once if the process exits."""
    async with aiohttp.ClientSession() as s:

        async def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"bot exited early: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                async with s.get(f"{url}/healthz") as r:
                    return r.status == 200
            except aiohttp.ClientError:
                return False

        await until(healthy, timeout, "the bot did not become healthy", interval=0.05)


async def test_http_channel_end_to_end(tmp_path: Path, bot_env: dict[str, str]) -> None:
    hooks: list[dict] = []

    async def webhook(request: web.Request) -> web.Response:
        hooks.append(await request.json())
        return web.json_response({})

    hook_app = web.Application()
    hook_app.router.add_post("/hook", webhook)
    hook_runner, hook_port = await serve(hook_app)

    async with ReplayServer() as model:
        port = free_port()
        cfg = write_config(
            tmp_path,
            f"{model.url}/v1",
            channels={
                "http": {
                    "host": "127.0.0.1",
                    "port": port,
                    "token": TOKEN,
                    "webhook_url": f"http://127.0.0.1:{hook_port}/hook",
                }
            },
        )
        proc = subprocess.Popen(
            [PYTHON, str(ROOT / "bot.py"), "--config", str(cfg), "--channel", "http"],
            cwd=tmp_path,
            env=bot_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        try:
            await wait_healthy(url, proc)
            async with aiohttp.ClientSession() as s:
                # Token required.
                async with s.post(
                    f"{url}/v1/messages", json={"chat_id": "c", "sender_id": "u", "text": "hi"}
                ) as r:
                    assert r.status == 401
                # Malformed bodies name the field.
                async with s.post(
                    f"{url}/v1/messages", headers=auth, json={"chat_id": "c", "text": "hi"}
                ) as r:
                    assert r.status == 400 and (await r.json())["field"] == "sender_id"
                async with s.post(f"{url}/v1/messages", headers=auth, data="not json") as r:
                    assert r.status == 400 and "JSON" in (await r.json())["error"]
                async with s.post(
                    f"{url}/v1/messages",
                    headers=auth,
                    json={"chat_id": "c", "sender_id": "u", "text": 5},
                ) as r:
                    assert r.status == 400 and (await r.json())["field"] == "text"

                # The event stream sees every message the bot sends.
                events = await s.get(f"{url}/v1/events", headers=auth)
                assert events.status == 200
                await events.content.readline()  # ": connected"

                # A group message with @bot: the model calls note_add; the function's own
                # confirmation is the reply, with an @-mention, and no second model call.
                model.queue.append(
                    lambda _r: web.json_response(
                        openai_chat_response(
                            tool_calls=[{"name": "note_add", "arguments": {"text": "buy milk"}}]
                        )
                    )
                )
                body = {
                    "chat_id": "team",
                    "sender_id": "bob",
                    "sender_name": "Bob",
                    "text": "note: buy milk",
                    "is_group": True,
                    "at_bot": True,
                }
                async with s.post(f"{url}/v1/messages", headers=auth, json=body) as r:
                    assert r.status == 200
                    assert await r.json() == {"replies": [{"text": "Noted: buy milk", "at": "bob"}]}
                assert len(model.received) == 1
                sent = model.received[0].body
                assert sent["messages"][-1]["content"].endswith("</context>\nBob: note: buy milk")
                assert "secret_reset" not in [t["function"]["name"] for t in sent["tools"]]

                line = await asyncio.wait_for(_next_event(events), 5)
                assert line == {"chat_id": "team", "text": "Noted: buy milk", "at": "bob"}

                # Not addressed in a group: stored, silent.
                body = {
                    "chat_id": "team",
                    "sender_id": "bob",
                    "text": "just chatting",
                    "is_group": True,
                }
                async with s.post(f"{url}/v1/messages", headers=auth, json=body) as r:
                    assert await r.json() == {"replies": []}
                assert len(model.received) == 1

                # A slash command needs no model; admin rules apply.
                async with s.post(
                    f"{url}/v1/messages",
                    headers=auth,
                    json={"chat_id": "dm", "sender_id": "bob", "text": "/secret_reset"},
                ) as r:
                    assert (await r.json())["replies"][0][
                        "text"
                    ] == "secret_reset is for admins only."
                async with s.post(
                    f"{url}/v1/messages",
                    headers=auth,
                    json={"chat_id": "dm2", "sender_id": "alice", "text": "/secret_reset"},
                ) as r:
                    assert (await r.json())["replies"][0]["text"] == "reset done"
                events.close()

            await until(lambda: len(hooks) >= 3, 10, lambda: f"webhook calls: {hooks}")
            assert {"chat_id": "team", "text": "Noted: buy milk", "at": "bob"} in hooks
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=15)
            await hook_runner.cleanup()
    assert proc.returncode == 0, err.decode()
    log = err.decode()
    assert "call note_add via llm -> ok" in log
    assert "sk-e2e-very-secret-value" not in log and TOKEN not in log
    # History survived in the SQLite file next to the config.
    assert (tmp_path / "data" / "chatfn.db").exists()


async def _next_event(resp: aiohttp.ClientResponse) -> dict:
    while True:
        line = (await resp.content.readline()).decode()
        if line.startswith("data: "):
            return json.loads(line[6:])
