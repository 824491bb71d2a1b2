"""What the channel benchmarks (bench_channel_<name>.py) share: a bot on a real SQLite file
answered by a scripted echo model, the HTTP channel as the baseline under the same load, the
latency summary and the command line. Each channel's script adds only how its local platform
server is driven and when a reply counts as taken."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loguru import logger  # noqa: E402

from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.channel_registry import find_channels  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel  # noqa: E402
from providers.types import LLMResponse, Message, Usage  # noqa: E402

Bench = Callable[[int, int, Path], Awaitable[dict[str, float]]]
"""One contender: (messages, in flight, a scratch folder) -> its figures."""


def echo(messages: list[Message], _tools: Any) -> LLMResponse:
    return LLMResponse(content="pong", finish_reason="stop", usage=Usage(5, 5))


def make_bot(folder: Path, channels: dict[str, Any]) -> Bot:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{folder / 'bench.db'}"},
            "plugins": {"paths": []},
            "channels": channels,
        },
        base_dir=folder,
    )
    return Bot(
        settings,
        model=ScriptedModel([echo], repeat_last=True),
        load_plugins=False,
        builtins=False,
    )


def summary(latencies: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "messages_per_s": len(latencies) / wall,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[int(len(ordered) * 0.95) - 1] * 1000,
    }


class Replies:
    """The replies a benchmark waits for, by chat: `expect` before a message is sent, `taken`
    from the fake platform's send hook when the bot's reply reaches it."""

    def __init__(self) -> None:
        self._waiting: dict[Hashable, asyncio.Future[None]] = {}

    def expect(self, key: Hashable) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        return future

    def taken(self, key: Hashable) -> None:
        future = self._waiting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(None)


async def drive(
    n: int,
    concurrency: int,
    replies: Replies,
    chat: Callable[[int], Hashable],
    send: Callable[[int], Awaitable[Any]],
) -> tuple[list[float], float]:
    """Messages 1..n, `concurrency` in flight, each timed from `send(i)` until the reply in
    `chat(i)` is taken; returns (latencies, wall seconds for all n)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(i: int) -> None:
        async with gate:
            future = replies.expect(chat(i))
            began = time.perf_counter()
            await send(i)
            await future
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(1, n + 1)))
    return latencies, time.perf_counter() - began


async def bench_http(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    import aiohttp

    bot = make_bot(folder, {"http": {"port": 0}})
    channel = find_channels().get("http").build(bot.channel_host)
    await channel.start()
    await bot.start()
    url = f"http://127.0.0.1:{channel.bound_port}/v1/messages"
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            async with gate:
                began = time.perf_counter()
                body = {"chat_id": f"private:{i}", "sender_id": str(i), "text": f"ping {i}"}
                async with session.post(url, json=body) as r:
                    assert r.status == 200, await r.text()
                    await r.read()
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(1, n + 1)))
        wall = time.perf_counter() - began
    await channel.stop()
    await bot.aclose()
    return summary(latencies, wall)


async def main(name: str, bench: Bench, doc: str) -> None:
    """Run the HTTP channel and `name` under the same load and print the comparison."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    results: dict[str, Any] = {}
    for contender, run in (("http", bench_http), (name, bench)):
        with tempfile.TemporaryDirectory() as folder:
            results[contender] = await run(args.messages, args.concurrency, Path(folder))
    results["added_p50_ms"] = results[name]["p50_ms"] - results["http"]["p50_ms"]
    results["added_p95_ms"] = results[name]["p95_ms"] - results["http"]["p95_ms"]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.messages} messages, {args.concurrency} in flight, echo model")
    for contender in ("http", name):
        r = results[contender]
        print(
            f"{contender:9} {r['messages_per_s']:7.1f} msg/s   p50 {r['p50_ms']:6.1f} ms   "
            f"p95 {r['p95_ms']:6.1f} ms"
        )
    added = results["added_p50_ms"], results["added_p95_ms"]
    print(f"{name} adds p50 {added[0]:+.1f} ms, p95 {added[1]:+.1f} ms")
