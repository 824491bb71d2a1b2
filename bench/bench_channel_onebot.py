"""The OneBot v11 channel under the HTTP channel's load: 1000 messages, each in its own private
chat, `--concurrency` in flight, answered by a scripted echo model (no model latency), so what
is measured is the channel's own cost: the implementation's events over the reverse WebSocket
(parsed, stored, answered) and one `send_private_msg` action per reply with its answer.

Contenders, run in this one process (the simulated implementation,
tests/channels/onebot/onebot_sim.py, and the HTTP client too, so both pay for their peer's CPU
alike), on a real SQLite file each:
  http    POST /v1/messages to the HTTP channel; latency = request to response.
  onebot  the simulated account posts a private message event; latency = event sent to the
          bot's send_private_msg action read.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
onebot's p50/p95 minus http's; `duplicates`: replies sent twice to one chat.

Run: `python bench/bench_channel_onebot.py` (about half a minute); `--messages`,
`--concurrency`, `--json`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench.channel_load import Replies, drive, main, make_bot, summary  # noqa: E402
from chatfn.runtime.channel_registry import find_channels  # noqa: E402
from tests.channels.onebot.onebot_sim import OneBotSim, text  # noqa: E402

SELF_ID = 10001000


async def bench_onebot(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    settings = {"host": "127.0.0.1", "port": 0, "send_rate": 0}
    bot = make_bot(folder, {"onebot": settings})
    channel = find_channels().get("onebot").build(bot.channel_host)
    await channel.start()
    await bot.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF_ID)
    replies = Replies()
    sends: list[int] = []
    original = sim._answer

    def answer(request: dict[str, Any]) -> dict[str, Any] | None:
        response = original(request)
        if request.get("action") == "send_private_msg":
            user = int(request["params"]["user_id"])
            sends.append(user)
            replies.taken(user)
        return response

    sim._answer = answer  # type: ignore[method-assign]
    await sim.connect()
    async with asyncio.timeout(10):
        while str(SELF_ID) not in channel.self_ids:
            await asyncio.sleep(0.01)

    async def send(i: int) -> None:
        await sim.private_message(20_000_000 + i, [text(f"ping {i}")])

    latencies, wall = await drive(n, concurrency, replies, lambda i: 20_000_000 + i, send)
    await sim.close()
    await channel.stop()
    await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("onebot", bench_onebot, __doc__ or ""))
