"""Memory that stays flat: one bot process answers `--messages` (100 000) messages over `--chats`
(2000) chats and its RSS is sampled; after the warm-up it must grow by at most 5 MB
(bench/README.md, "Memory: the soak").

    python bench/soak_memory.py [--messages 100000] [--chats 2000] [--concurrency 100]

The bot: `python bot.py --channel http` on a SQLite file, a model that can see images
(bench/fake_openai.py, no latency: every message is a tool call to get_weather and an answer),
limits on, built-ins on. The mix, by message number i: every 10th carries a PNG image (a data
URI: fetched, decoded and sent to the model), every 50th is `/reminder_set in 5s ...` (a
reminder that fires 5 s later and is done, through the scheduler and the outbox), every 100th
is `/stats`; the rest are plain questions. Each chat's messages go one after another; the chats
run `--concurrency` at a time. RSS (`VmRSS` of the bot) is sampled every `--every` messages;
the warm-up is the first `--warmup` messages. Prints the samples and the growth after warm-up,
and with `--json` the whole report.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import os
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fake_openai import ServerProcess  # noqa: E402
from tests.cluster.conftest import Proc, free_port  # noqa: E402
from tests.fakes.images import png  # noqa: E402

LIMIT_MB = 5.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_config(work: Path, model_url: str) -> Path:
    data = {
        "storage": {"url": f"sqlite:///{work / 'soak.db'}"},
        "models": {
            "default": {
                "provider": "openai",
                "base_url": model_url,
                "api_key": "bench",
                "model": "gpt-4o-mini",
                "native_tools": True,
                "vision": True,
            }
        },
        "plugins": {"paths": [str(ROOT / "bench" / "weather_plugin.py")]},
        "logging": {"level": "INFO"},
        "limits": {
            "per_user": {"messages_per_minute": 10**6, "model_calls_per_day": 10**9},
            "per_chat": {"messages_per_minute": 10**6},
        },
        "reminders": {"max_per_user": 1000},
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def body_for(i: int, chat: str, image: str) -> dict[str, object]:
    if i % 50 == 0:
        return {"chat_id": chat, "sender_id": chat, "text": f"/reminder_set in 5s stretch {i}"}
    if i % 100 == 1:
        return {"chat_id": chat, "sender_id": chat, "text": "/stats"}
    body: dict[str, object] = {"chat_id": chat, "sender_id": chat, "text": f"weather? {i}"}
    if i % 10 == 3:
        body["images"] = [image]
    return body


async def soak(base: str, pid: int, args: argparse.Namespace) -> dict[str, object]:
    image = "data:image/png;base64," + base64.b64encode(png()).decode()
    samples: list[tuple[int, float, float]] = []  # (messages done, seconds, RSS MB)
    done = 0
    failed = 0
    # Why messages failed ("HTTP 503", "ServerDisconnectedError", ...): a count says nothing of
    # whether the bot or the connection failed.
    reasons: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    next_sample = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for c in range(args.chats):
        queue.put_nowait(c)
    per_chat = args.messages // args.chats
    position = [0] * args.chats
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(
        timeout=timeout, connector=aiohttp.TCPConnector(limit=0)
    ) as session:

        async def worker() -> None:
            nonlocal done, failed, next_sample
            while True:
                try:
                    c = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                k = position[c]
                position[c] += 1
                i = k * args.chats + c
                try:
                    async with session.post(
                        f"{base}/v1/messages", json=body_for(i, f"soak{c}", image)
                    ) as r:
                        await r.read()
                        if r.status != 200:
                            failed += 1
                            reasons[f"HTTP {r.status}"] += 1
                except aiohttp.ClientError as exc:
                    failed += 1
                    reasons[type(exc).__name__] += 1
                done += 1
                if done >= next_sample:
                    samples.append((done, time.monotonic() - started, rss_mb(pid)))
                    print(
                        f"{done:7d} messages  {samples[-1][1]:7.1f} s  RSS {samples[-1][2]:.1f} MB",
                        flush=True,
                    )
                    next_sample += args.every
                if position[c] < per_chat:
                    queue.put_nowait(c)  # the chat's next message, behind the other chats

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    await asyncio.sleep(8)  # the last reminders fire
    samples.append((done, time.monotonic() - started, rss_mb(pid)))
    after = [s for s in samples if s[0] >= args.warmup]
    base_rss = after[0][2] if after else samples[-1][2]
    growth = max(s[2] for s in after) - base_rss if after else 0.0
    return {
        "messages": done,
        "failed": failed,
        "failed_why": dict(reasons),
        "seconds": samples[-1][1],
        "rss_at_warmup_mb": base_rss,
        "rss_max_after_warmup_mb": max(s[2] for s in after) if after else None,
        "rss_end_mb": samples[-1][2],
        "growth_after_warmup_mb": growth,
        "limit_mb": LIMIT_MB,
        "samples": samples,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--chats", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20_000)
    ap.add_argument("--every", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"chatfn-soakmem-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    server = ServerProcess(latency_ms=0).start()
    port = free_port()
    bot = Proc(
        ["--config", str(write_config(work, server.url)), "--channel", "http", "--port", str(port)],
        work / "bot.log",
    )
    try:
        bot.wait_for("chatfn started", 60)
        report = asyncio.run(soak(f"http://127.0.0.1:{port}", bot.p.pid, args))
    finally:
        bot.stop()
        server.stop()
    report["workdir"] = str(work)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{report['messages']} messages ({report['failed']} failed) in "
            f"{report['seconds']:.0f} s; RSS after warm-up {report['rss_at_warmup_mb']:.1f} MB, "
            f"max after {report['rss_max_after_warmup_mb']:.1f} MB, end "
            f"{report['rss_end_mb']:.1f} MB: grew {report['growth_after_warmup_mb']:.1f} MB "
            f"(limit {LIMIT_MB} MB)"
        )
        if report["failed_why"]:
            print("failed:", ", ".join(f"{k} x{v}" for k, v in report["failed_why"].items()))


if __name__ == "__main__":
    main()
