"""The Feishu channel under the HTTP channel's load: 1000 messages, each in its own p2p chat,
`--concurrency` in flight, answered by a scripted echo model (no model latency), so what is
measured is the channel's own cost: event frames over the long connection (protobuf, read by
lark-oapi's ws client on its own thread and handed to the bot's loop), the chat's member
list once per chat (the sender's name), and the reply card through lark-oapi's REST client to
the local open platform (tests/channels/feishu/feishu_fake.py).

Contenders, run in this one process (the fake server and the HTTP client too, so both pay for
their peer's CPU alike), on a real SQLite file each:
  http    POST /v1/messages to the HTTP channel; latency = request to response.
  feishu  the fake server sends an im.message.receive_v1 frame; latency = sent to the bot's
          im/v1/messages taken.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
feishu's p50/p95 minus http's.

Run: `python bench/bench_channel_feishu.py` (about half a minute); `--messages`,
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
from tests.channels.feishu.feishu_fake import FakeFeishu  # noqa: E402


async def bench_feishu(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeFeishu() as fake:
        settings = {
            "app_id": fake.app_id,
            "app_secret": fake.app_secret,
            "domain": fake.domain,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"feishu": settings})
        channel = find_channels().get("feishu").build(bot.channel_host)
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        original = fake._post

        async def posted(chat_id: str, body: dict[str, Any], parent: str = "") -> Any:
            response = await original(chat_id, body, parent)
            replies.taken(chat_id)
            return response

        fake._post = posted  # type: ignore[method-assign]

        async def send(i: int) -> None:
            await fake.push(
                fake.message_event(f"oc_p{i}", f"ou_{i}", group=False, text=f"ping {i}")
            )

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"oc_p{i}", send)
        sends = [p.chat_id for p in fake.posted]
        await channel.stop()
        await task
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(sends) - len(set(sends))
    return result


if __name__ == "__main__":
    asyncio.run(main("feishu", bench_feishu, __doc__ or ""))
