"""The Slack channel under the HTTP channel's load: 1000 messages, each in its own DM,
`--concurrency` in flight, answered by a scripted echo model (no model latency), so what is
measured is the channel's own cost: Socket Mode envelopes (read, acknowledged, parsed),
users.info once per user, chat.postMessage through slack_sdk's AsyncWebClient to the local
Slack (tests/channels/slack/slack_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http   POST /v1/messages to the HTTP channel; latency = request to response.
  slack  the fake server sends an events_api envelope; latency = sent to the bot's
         chat.postMessage taken.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
slack's p50/p95 minus http's.

Run: `python bench/bench_channel_slack.py` (about half a minute); `--messages`, `--concurrency`,
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
from tests.channels.slack.slack_fake import FakeSlack  # noqa: E402


async def bench_slack(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeSlack() as fake:
        settings = {
            "bot_token": fake.bot_token,
            "app_token": fake.app_token,
            "api_base": fake.api_base,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"slack": settings})
        channel = find_channels().get("slack").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        original = fake._post_message

        async def posted(args: dict[str, Any]) -> Any:
            response = await original(args)
            replies.taken(str(args.get("channel")))
            return response

        fake._post_message = posted  # type: ignore[method-assign]
        for i in range(1, n + 1):
            fake.user(f"U{i}", f"user {i}")

        async def send(i: int) -> None:
            await fake.push(fake.callback(fake.message_event(f"D{i}", f"U{i}", f"ping {i}")))

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"D{i}", send)
        sends = [p.channel for p in fake.posted]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("slack", bench_slack, __doc__ or ""))
