"""SIGTERM / SIGINT with a /v1/events client, a OneBot peer and a turn in flight connected:
bounded, clean, exit 0, storage closed (issue 11 §5). The real `python bot.py`."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.bot.conftest import PYTHON, ROOT, write_config
from tests.bot.test_http import wait_healthy
from tests.channels.onebot.onebot_sim import OneBotSim
from tests.kit import free_port, hang, serve, wait_event


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_signal_stops_within_the_grace_period_and_exits_0(
    tmp_path: Path, bot_env: dict[str, str], sig: signal.Signals
) -> None:
    # A model that never answers: the turn in flight must be abandoned after the grace.
    asked = asyncio.Event()

    async def never_answers(request: web.Request) -> web.Response:
        asked.set()
        await hang()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", never_answers)
    runner, model_port = await serve(app, handler_cancellation=True, shutdown_timeout=0.5)
    http_port, onebot_port = free_port(), free_port()  # told to `python bot.py` in its config
    cfg = write_config(
        tmp_path,
        f"http://127.0.0.1:{model_port}/v1",
        bot={"shutdown_grace": 1.5},
        channels={
            "http": {"host": "127.0.0.1", "port": http_port},
            "onebot": {"host": "127.0.0.1", "port": onebot_port},
        },
    )
    proc = subprocess.Popen(
        [PYTHON, str(ROOT / "bot.py"), "--config", str(cfg), "--channel", "http"]
        + ["--channel", "onebot"],
        cwd=tmp_path,
        env=bot_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{http_port}"
    sim = OneBotSim(f"ws://127.0.0.1:{onebot_port}/onebot/v11/ws", 10001000)
    try:
        await wait_healthy(url, proc)
        await sim.connect()
        async with aiohttp.ClientSession() as s:
            events = await s.get(f"{url}/v1/events")
            await events.content.readline()
            turn = asyncio.ensure_future(
                s.post(f"{url}/v1/messages", json={"chat_id": "c", "sender_id": "u", "text": "hi"})
            )
            await wait_event(asked, 10, "the turn did not reach the model")
            started = time.monotonic()
            proc.send_signal(sig)
            lines = []
            async with asyncio.timeout(10):
                while line := await events.content.readline():
                    lines.append(line.decode())
            assert any(line.startswith("event: closing") for line in lines), lines
            await asyncio.gather(turn, return_exceptions=True)
            code = await asyncio.to_thread(proc.wait, 10)
            elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
        await sim.close()
        await runner.cleanup()
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert code == 0, err
    assert elapsed < 6, elapsed
    assert "Traceback" not in err, err
    assert "abandoned" in err and "chatfn stopped" in err
