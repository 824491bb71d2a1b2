"""A turn a SIGKILL cut short is handled at the next start (issue 11, soak gap): the real
`python bot.py --channel http`, killed while the model is thinking, answers each cut message
once after the restart, and not again after a second restart. The same for a SIGTERM whose
grace ran out: an abandoned turn is not finished, so it is not recorded as finished."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import create_engine, select

from chatfn.storage.models import outbox_table
from tests.bot.conftest import PYTHON, ROOT, write_config
from tests.bot.test_http import wait_healthy
from tests.kit import free_port, hang, serve, until


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
async def test_a_turn_cut_short_is_answered_once_after_restart(
    tmp_path: Path, bot_env: dict[str, str], stop: signal.Signals
) -> None:
    state: dict[str, Any] = {"hang": True, "answered": [], "waiting": 0}

    async def model(request: web.Request) -> web.Response:
        body = await request.json()
        if state["hang"]:
            state["waiting"] += 1
            await hang()  # until the bot is killed (the connection drops)
        # The newest message opens with the bot's time note (a stable prompt prefix).
        last = body["messages"][-1]["content"].split("</context>\n", 1)[-1]
        state["answered"].append(last)
        return web.json_response(_completion(f"answer to {last}"))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", model)
    runner, model_port = await serve(app, handler_cancellation=True, shutdown_timeout=0.5)
    http_port = free_port()  # told to `python bot.py`, which must come back at the same URL
    cfg = write_config(
        tmp_path,
        f"http://127.0.0.1:{model_port}/v1",
        channels={"http": {"host": "127.0.0.1", "port": http_port}},
        bot={"shutdown_grace": 0.5},
    )
    url = f"http://127.0.0.1:{http_port}"
    cmd = [PYTHON, str(ROOT / "bot.py"), "--config", str(cfg), "--channel", "http"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            cmd, cwd=tmp_path, env=bot_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    procs = [start()]
    try:
        await wait_healthy(url, procs[0])
        async with aiohttp.ClientSession() as s:
            posts = [
                asyncio.ensure_future(
                    s.post(
                        f"{url}/v1/messages",
                        json={"chat_id": chat, "sender_id": "u", "text": text},
                    )
                )
                for chat, text in (("c1", "first"), ("c2", "second"))
            ]
            # Both turns are stored and wait on the model (waited for, not slept: on a loaded
            # machine one second was sometimes not enough for the second turn to get there).
            await until(lambda: state["waiting"] >= 2, 30, "the turns did not reach the model")
            procs[0].send_signal(stop)
            procs[0].wait(20)
            await asyncio.gather(*posts, return_exceptions=True)
        assert state["answered"] == []  # nothing was answered before the kill

        state["hang"] = False
        procs.append(start())
        await wait_healthy(url, procs[1])
        replies = await _events(url, want=2)
        assert sorted(r["text"] for r in replies) == ["answer to first", "answer to second"]
        assert sorted(state["answered"]) == ["first", "second"]

        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(15) == 0
        procs.append(start())  # a third start resumes nothing: the turns are recorded finished
        await wait_healthy(url, procs[2])  # its resume pass ran before it listened
        procs[2].send_signal(signal.SIGTERM)
        _, err = procs[2].communicate(timeout=15)
        assert procs[2].returncode == 0, err
        assert "resuming" not in err.decode(), err
        assert sorted(state["answered"]) == ["first", "second"]
        assert sorted(_answers_stored(tmp_path)) == ["answer to first", "answer to second"]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        await runner.cleanup()


async def _events(url: str, want: int) -> list[dict[str, Any]]:
    """Every bot message so far, read from the event stream from the start (`?since=0`)."""
    out: dict[str, dict[str, Any]] = {}
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/v1/events?since=0") as resp:
            event_id = ""
            try:
                async with asyncio.timeout(15):
                    while line := await resp.content.readline():
                        text = line.decode().strip()
                        if text.startswith("id:"):
                            event_id = text[3:].strip()
                        elif text.startswith("data:") and event_id:
                            data = json.loads(text[5:])
                            if data.get("text", "").startswith("answer to"):
                                out[event_id] = data
                            if len(out) >= want:
                                break
            except TimeoutError:
                pass
    return list(out.values())


def _answers_stored(tmp_path: Path) -> list[str]:
    """Every answer the bot ever sent, from its outbox table (each bot message has a row): a
    turn run twice, in any of the starts, would show here twice."""
    engine = create_engine(f"sqlite:///{tmp_path / 'data' / 'chatfn.db'}")
    try:
        with engine.connect() as conn:
            payloads = conn.execute(select(outbox_table.c.payload)).scalars().all()
    finally:
        engine.dispose()
    texts = [json.loads(p).get("text", "") for p in payloads]
    return [t for t in texts if t.startswith("answer to")]
