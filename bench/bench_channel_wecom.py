"""The WeCom channel (self-built app, `mode: app`) under the HTTP channel's load: 1000
messages, each from its own user, `--concurrency` in flight, answered by a scripted echo model
(no model latency), so what is measured is the channel's own cost: each message an encrypted,
signed callback POSTed to the bot's web server (checked, AES-decrypted, stored, answered 200
once stored), and the reply through message/send with the access token to the local WeCom
(tests/channels/wecom/wecom_fake.py).

Contenders, run in this one process (the fake server and its HTTP client too, so both pay for
their peer's CPU alike; the fake opens a client session per callback, as a new connection per
delivery is what WeCom's servers make), on a real SQLite file each:
  http   POST /v1/messages to the HTTP channel; latency = request to response.
  wecom  the fake posts a callback; latency = posted to the bot's reply taken by message/send.
Figures: messages per second (wall, all 1000) and per-message latency p50/p95; "added" is
wecom's p50/p95 minus http's.

Run: `python bench/bench_channel_wecom.py` (about half a minute); `--messages`,
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
from tests.channels.wecom.wecom_driver import serve_webhooks  # noqa: E402
from tests.channels.wecom.wecom_fake import FakeWecom, Posted  # noqa: E402


async def bench_wecom(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    async with FakeWecom() as fake:
        settings = {
            "corp_id": fake.corp_id,
            "secret": fake.secret,
            "agent_id": fake.agent_id,
            "token": fake.token,
            "encoding_aes_key": fake.aes_key,
            "api_base": fake.base,
            "send_rate": 0,
        }
        bot = make_bot(folder, {"wecom": settings})
        spec = find_channels().get("wecom")
        channel = spec.build(bot.channel_host)
        listener = await serve_webhooks(bot.channel_host)
        fake.callback_url = (
            f"http://127.0.0.1:{listener.bound_port}{spec.settings_from(bot.settings).webhook_path}"
        )
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
            status, _ = await fake.deliver(fake.message_xml(f"u{i}", fake.next_id(), f"ping {i}"))
            assert status == 200, status

        latencies, wall = await drive(n, concurrency, replies, lambda i: f"u{i}", send)
        await channel.stop()
        await task
        await listener.stop()
        await bot.aclose()
    result = summary(latencies, wall)
    result["duplicates"] = len(taken) - len(set(taken))
    return result


if __name__ == "__main__":
    asyncio.run(main("wecom", bench_wecom, __doc__ or ""))
