"""The QQ channel under the HTTP channel's load: 1000 messages, each in its own C2C chat,
`--concurrency` in flight, answered by a scripted echo model (no model latency), so what is
measured is the channel's own cost: gateway Dispatch events (read, parsed, a `was_stored`
check), then a passive reply (`msg_id` + `msg_seq`) POSTed to /v2/users/{openid}/messages
with the access token, through aiohttp to the local QQ (tests/channels/qq/qq_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http   POST /v1/messages to the HTTP channel; latency = request to response.
  qq     the fake gateway sends a C2C_MESSAGE_CREATE; latency = sent to the bot's reply
         taken.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
qq's p50/p95 minus http's.

Run: `python bench/bench_channel_qq.py` (about half a minute); `--messages`, `--concurrency`,
`--json`.
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
from tests.channels.qq.qq_fake import FakeQQ  # noqa: E402


async def bench_qq(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeQQ() as fake:
        settings = {
            "app_id": fake.app_id,
            "secret": fake.secret,
            "api_base": fake.base,
            "token_url": fake.token_url,
            "send_rate": 0,
            # The gateway (WebSocket) delivery: webhook is the default since Tencent withdraws
            # WebSocket delivery for new bots; this bench measures the gateway path.
            "mode": "websocket",
        }
        bot = make_bot(folder, {"qq": settings})
        channel = find_channels().get("qq").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        original = fake._took

        async def took(scene: str, target: str, body: dict[str, Any], images: Any) -> Any:
            response = await original(scene, target, body, images)
            replies.taken(target)
            return response

        fake._took = took  # type: ignore[method-assign]

        async def send(i: int) -> None:
            d = fake.message_event(
                "C2C_MESSAGE_CREATE", target="", sender=f"U{i}", content=f"ping {i}"
            )
            await fake.push("C2C_MESSAGE_CREATE", d)

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"U{i}", send)
        sends = [p.target for p in fake.posted]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("qq", bench_qq, __doc__ or ""))
