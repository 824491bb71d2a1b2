"""The KOOK channel under the HTTP channel's load: 1000 messages, each in its own direct
message chat, `--concurrency` in flight, answered by a scripted echo model (no model
latency), so what is measured is the channel's own cost: events as zlib-compressed frames on
the fake's gateway (inflated, read in `sn` order, confirmed once stored), and the reply as one
KMarkdown POST /api/v3/direct-message/create to the local KOOK
(tests/channels/kook/kook_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http  POST /v1/messages to the HTTP channel; latency = request to response.
  kook  the fake server pushes a direct message event; latency = pushed to the bot's reply
        taken by direct-message/create.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
kook's p50/p95 minus http's.

Run: `python bench/bench_channel_kook.py` (about half a minute); `--messages`,
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
from tests.channels.kook.kook_fake import FakeKook  # noqa: E402


async def bench_kook(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeKook() as fake:
        settings = {"token": fake.token, "api_base": fake.api_base, "send_rate": 0}
        bot = make_bot(folder, {"kook": settings})
        channel = find_channels().get("kook").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        fake.on_sent = lambda posted: replies.taken(posted.target)

        def user(i: int) -> str:
            return str(100_000 + i)

        async def send(i: int) -> None:
            await fake.say("private", user(i), user(i), f"ping {i}")

        latencies, wall = await drive(n, concurrency, replies, user, send)
        sends = [p.target for p in fake.posted]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("kook", bench_kook, __doc__ or ""))
