"""The Discord channel under the HTTP channel's load: 1000 messages, each in its own DM,
`--concurrency` in flight, answered by a scripted echo model (no model latency), so what is
measured is the channel's own cost: discord.py's Gateway parsing of MESSAGE_CREATE, the DM
channel lookup, Markdown rendering and a REST POST per reply through discord.py's rate-limit
buckets, against the local Discord (tests/channels/discord/discord_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http      POST /v1/messages to the HTTP channel; latency = request to response.
  discord   the fake Gateway dispatches MESSAGE_CREATE; latency = dispatched to the bot's
            Create Message taken by the fake REST server.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
discord's p50/p95 minus http's.

Run: `python bench/bench_channel_discord.py` (about half a minute); `--messages`,
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
from tests.channels.discord.discord_fake import FakeDiscord  # noqa: E402


async def bench_discord(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeDiscord() as fake:
        settings = {"token": fake.token, "guild_ready_timeout": 0.05, **fake.urls}
        bot = make_bot(folder, {"discord": settings})
        channel = find_channels().get("discord").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        fake.on_sent = lambda sent: replies.taken(sent.channel_id)

        async def send(i: int) -> None:
            await fake.say(None, f"ping {i}", author=i, dm=True)

        latencies, wall = await drive(n, concurrency, replies, fake.dm_channel, send)
        sends = [s.channel_id for s in fake.sent]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("discord", bench_discord, __doc__ or ""))
