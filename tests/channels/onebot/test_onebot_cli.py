"""`python bot.py --channel onebot --channel http`: the real entry point, both channels side by
side, a OneBot implementation connecting to it and the access token kept out of the log."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp
import yaml

from tests.channels.onebot.onebot_sim import OneBotSim, plain
from tests.kit import free_port, until

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "cli-onebot-token"


async def test_bot_py_runs_onebot_and_http_side_by_side(tmp_path: Path) -> None:
    ob_port, http_port = free_port(), free_port()  # told in its config before it starts
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"url": "sqlite:///chatfn.db"},
                "plugins": {"paths": []},
                "channels": {
                    "onebot": {"port": ob_port, "access_token": TOKEN},
                    "http": {"port": http_port},
                },
            }
        )
    )
    env_log = tmp_path / "bot.log"
    with env_log.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "bot.py"),
            "--config",
            str(config),
            "--channel",
            "onebot",
            "--channel",
            "http",
            cwd=tmp_path,
            stdout=log,
            stderr=log,
        )
    sim = OneBotSim(f"ws://127.0.0.1:{ob_port}/onebot/v11/ws", 4242, token=TOKEN)
    try:
        # Up to 30 s for the bot to listen: a start under a loaded machine (the whole suite on
        # two cores) took longer than the 10 s this waited before, and the test went on
        # unconnected.
        async def connected() -> bool:
            try:
                await sim.connect()
            except aiohttp.ClientConnectionError:
                return False
            return True

        never = lambda: f"the bot never listened: {env_log.read_text()[-2000:]}"  # noqa: E731
        await until(connected, 30, never, interval=0.1)
        await sim.private_message(7, "/help")
        action = await sim.wait_action("send_private_msg", timeout=10)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{http_port}/") as page:
                assert page.status == 200
                assert "<title>chatfn</title>" in await page.text()
    finally:
        await sim.close()
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    assert "/help" in plain(action["params"]["message"])
    log_text = env_log.read_text()
    assert "OneBot account 4242 connected" in log_text
    assert TOKEN not in log_text
