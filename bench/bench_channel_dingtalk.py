"""The DingTalk channel under the HTTP channel's load: 1000 messages, each in its own
one-to-one chat, `--concurrency` in flight, answered by a scripted echo model (no model
latency), so what is measured is the channel's own cost: CALLBACK frames over the Stream
connection (read through the dingtalk-stream SDK's route_message and its handler, acked once
stored), and the reply through the message's session webhook (DingTalk Markdown) to the local
DingTalk (tests/channels/dingtalk/dingtalk_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http      POST /v1/messages to the HTTP channel; latency = request to response.
  dingtalk  the fake server sends a robot-message frame; latency = sent to the bot's reply
            taken by the session webhook.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
dingtalk's p50/p95 minus http's.

Run: `python bench/bench_channel_dingtalk.py` (about half a minute); `--messages`,
`--concurrency`, `--json`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench.channel_load import Replies, drive, main, make_bot, summary  # noqa: E402
from chatfn.runtime.channel_registry import find_channels  # noqa: E402
from tests.channels.dingtalk.dingtalk_fake import FakeDingTalk  # noqa: E402


async def bench_dingtalk(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeDingTalk() as fake:
        settings = {
            "client_id": fake.app_key,
            "client_secret": fake.app_secret,
            "api_base": fake.base,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"dingtalk": settings})
        channel = find_channels().get("dingtalk").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        fake.on_sent = lambda posted: replies.taken(posted.target)

        async def send(i: int) -> None:
            await fake.push(fake.robot_message(group=None, sender=f"u{i}", text=f"ping {i}"))

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"u{i}", send)
        sends = [p.target for p in fake.sent]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("dingtalk", bench_dingtalk, __doc__ or ""))
