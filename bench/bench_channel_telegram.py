"""The Telegram channel under the HTTP channel's load: 1000 messages, each in its own private
chat, `--concurrency` in flight, answered by a scripted echo model (no model latency), so what
is measured is the channel's own cost: getUpdates long polling, python-telegram-bot's request
and parsing, sendMessage through the local Bot API server
(tests/channels/telegram/telegram_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http      POST /v1/messages to the HTTP channel; latency = request to response.
  telegram  the fake server queues an Update; latency = queued to the bot's sendMessage taken.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
telegram's p50/p95 minus http's.

Run: `python bench/bench_channel_telegram.py` (about half a minute); `--messages`, `--concurrency`,
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
from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402


async def bench_telegram(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeTelegram() as fake:
        settings = {"token": fake.token, "base_url": fake.base_url, "send_rate": 0}
        bot = make_bot(folder, {"telegram": settings})
        channel = find_channels().get("telegram").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        original = fake._took

        async def took(method: str, params: dict[str, Any], chat_id: int | None, raw: str) -> Any:
            response = await original(method, params, chat_id, raw)
            replies.taken(chat_id or 0)
            return response

        fake._took = took  # type: ignore[method-assign]

        async def send(i: int) -> None:
            await fake.message(fake.private(i), f"ping {i}")

        latencies, wall = await drive(n, concurrency, replies, lambda i: i, send)
        sends = [s.chat_id for s in fake.sent]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("telegram", bench_telegram, __doc__ or ""))
