"""The WeChat Official Account channel under the HTTP channel's load: 1000 messages, each from
its own follower, `--concurrency` in flight, answered by a scripted echo model (no model
latency), so what is measured is the channel's own cost: each message a signed, encrypted (safe
mode) XML callback POSTed to the bot's web server, answered in the callback's own response (the
passive reply, encrypted and signed) within WeChat's 5 seconds, as the local WeChat
(tests/channels/wechat_mp/wechat_mp_fake.py) reads it.

Contenders, run in this one process (the fake server and its HTTP client too), on a real SQLite
file each:
  http       POST /v1/messages to the HTTP channel; latency = request to response.
  wechat_mp  the fake posts a callback; latency = posted to the passive reply read.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
wechat_mp's p50/p95 minus http's.

Run: `python bench/bench_channel_wechat_mp.py` (about half a minute); `--messages`,
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
from tests.channels.wechat_mp.wechat_mp_fake import FakeWechatMp, Posted  # noqa: E402
from tests.channels.wecom.wecom_driver import serve_webhooks  # noqa: E402


async def bench_wechat_mp(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeWechatMp() as fake:
        settings = {
            "app_id": fake.app_id,
            "app_secret": fake.app_secret,
            "token": fake.token,
            "encoding_aes_key": fake.aes_key,
            "api_base": fake.base,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"wechat_mp": settings})
        spec = find_channels().get("wechat_mp")
        channel = spec.build(bot.channel_host)
        listener = await serve_webhooks(bot.channel_host)
        path = spec.settings_from(bot.settings).webhook_path
        fake.callback_url = f"http://127.0.0.1:{listener.bound_port}{path}"
        task = asyncio.create_task(channel.run())
        await channel.wait_ready()
        await bot.start()
        replies = Replies()
        taken: list[str] = []
        record = fake._record

        async def on_record(posted: Posted) -> None:
            await record(posted)
            taken.append(posted.target)
            replies.taken(posted.target)

        fake._record = on_record  # type: ignore[method-assign]

        async def send(i: int) -> None:
            user = f"o{i}"
            status, _ = await fake.deliver(
                user, fake.message_xml(user, fake.next_id(), f"ping {i}")
            )
            assert status == 200, status

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"o{i}", send)
        await channel.stop()
        await task
        await listener.stop()
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(taken) - len(set(taken))
    return result


if __name__ == "__main__":
    asyncio.run(main("wechat_mp", bench_wechat_mp, __doc__ or ""))
