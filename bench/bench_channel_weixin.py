"""The WeChat (iLink) channel under the HTTP channel's load: 1000 messages, each from its own
user, `--concurrency` in flight, answered by a scripted echo model (no model latency), so what
is measured is the channel's own cost: messages taken by getupdates long polls (cursor stored
once they are), each reply one sendmessage with the chat's context token, to the local iLink
(tests/channels/weixin/weixin_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http    POST /v1/messages to the HTTP channel; latency = request to response.
  weixin  the fake queues a user's message for the next getupdates; latency = queued to the
          bot's reply taken by sendmessage.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
weixin's p50/p95 minus http's.

Run: `python bench/bench_channel_weixin.py` (about half a minute); `--messages`,
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
from tests.channels.weixin.weixin_fake import FakeIlink  # noqa: E402


class _Taken(list[Any]):
    """The fake's record of sends, telling the benchmark of each as it is appended."""

    def __init__(self, replies: Replies) -> None:
        super().__init__()
        self.replies = replies

    def append(self, posted: Any) -> None:
        super().append(posted)
        self.replies.taken(posted.chat)


async def bench_weixin(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeIlink() as fake:
        settings = {
            "token": fake.token,
            "base_url": fake.api_base,
            "cdn_base_url": fake.cdn_base,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"weixin": settings})
        channel = find_channels().get("weixin").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        fake.posted = _Taken(replies)

        async def send(i: int) -> None:
            await fake.say(f"u{i}", f"ping {i}")

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"private:u{i}", send)
        chats = [p.chat for p in fake.posted]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(chats) - len(set(chats))
    return result


if __name__ == "__main__":
    asyncio.run(main("weixin", bench_weixin, __doc__ or ""))
