"""How much of each model request repeats the previous one byte for byte (what prompt caches
bill at a fraction of the price).

A 20-turn conversation in one private chat, `bot.history_size: 20`, the built-ins as the tool
list, through a Bot built as `bot.py` builds one, with an OpenAI-compatible model at a local
capture server. The bot's clock is injected and advances `--seconds-per-turn` (default 25 s, so
the conversation spans about 8 minutes of the bot's time). The server keeps each request's raw
bytes as sent and, like OpenAI, reports cached tokens for the prefix a request shares with the
previous one: whole 128-token blocks once the prefix reaches 1024 tokens (4 bytes per token
assumed), in `usage.prompt_tokens_details.cached_tokens`.

Printed: per turn, the shared prefix as a fraction of the previous request; the median, the
turns below 90%, and the cached share of all prompt tokens.

    python bench/bench_prefix.py
    python bench/bench_prefix.py --json

Code without an injectable clock (before issue 12) is measured by patching the `datetime` its
conversation module reads, so both run the same conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from chatfn.common.messages import IncomingMessage, OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402

START = datetime(2027, 1, 15, 9, 58, 40, tzinfo=UTC).timestamp()  # minutes roll over early
TURNS = 20
QUESTIONS = [
    "Can you help me plan a small team offsite for next month? We are about twelve people.",
    "What would be a sensible budget per person for two days, including food?",
    "We prefer somewhere reachable by train within two hours. Any kind of place you suggest?",
    "Good. What activities work for a mix of introverts and extroverts?",
    "How should we split the time between work sessions and free time?",
]


def answer(i: int) -> str:
    return (
        f"Here is a thought for step {i}: keep it simple, agree on goals first, then pick a "
        "venue that fits the budget and the travel time. I can draft an agenda if you like."
    )


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo = 0
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


class CaptureServer:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.cached: list[int] = []
        self.prompt: list[int] = []

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        shared = common_prefix(raw, self.bodies[-1]) if self.bodies else 0
        self.bodies.append(raw)
        prompt_tokens = len(raw) // 4
        cached = (shared // 4) // 128 * 128 if shared // 4 >= 1024 else 0
        self.prompt.append(prompt_tokens)
        self.cached.append(cached)
        n = len(self.bodies)
        return web.json_response(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer(n)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": 40,
                    "total_tokens": prompt_tokens + 40,
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            }
        )


def install_clock(bot_kwargs: dict[str, Any], now: list[float]) -> None:
    """The new Bot takes `clock`; older code read `datetime.now` in its conversation module."""
    if "clock" in inspect.signature(Bot.__init__).parameters:
        bot_kwargs["clock"] = lambda: now[0]
        return
    import function_calls.conversation as conversation

    class FakeDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> FakeDatetime:  # type: ignore[override]
            real = datetime.fromtimestamp(now[0], tz or UTC)
            return cls.fromtimestamp(real.timestamp(), real.tzinfo)

    conversation.datetime = FakeDatetime  # type: ignore[attr-defined,misc]


async def run(turns: int, seconds_per_turn: float) -> dict[str, Any]:
    server = CaptureServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    now = [START]
    with tempfile.TemporaryDirectory() as tmp:
        settings = parse_settings(
            {
                "models": {
                    "default": {
                        "provider": "openai",
                        "base_url": f"http://127.0.0.1:{port}/v1",
                        "api_key": "bench",
                        "model": "gpt-4o-mini",
                        "native_tools": True,
                    }
                },
                "bot": {"history_size": 20, "timezone": "Europe/Berlin"},
                "storage": {"url": f"sqlite:///{Path(tmp) / 'bench.db'}"},
                "plugins": {"paths": []},
                "logging": {"level": "WARNING"},
            },
            base_dir=Path(tmp),
        )
        from loguru import logger

        logger.remove()
        kwargs: dict[str, Any] = {}
        install_clock(kwargs, now)
        bot = Bot(settings, **kwargs)

        async def sink(_out: OutgoingMessage) -> None:
            return None

        for i in range(turns):
            msg = IncomingMessage(
                platform="bench",
                chat_id="private:ann",
                sender_id="ann",
                sender_name="Ann",
                text=QUESTIONS[i % len(QUESTIONS)] + f" (#{i + 1})",
                is_group=False,
                message_id=f"m{i}",
            )
            await bot.handle(msg, sink)
            now[0] += seconds_per_turn
        await bot.aclose()
    await runner.cleanup()
    bodies = server.bodies
    fractions = [common_prefix(b, a) / len(a) for a, b in zip(bodies, bodies[1:], strict=False)]
    return {
        "requests": len(bodies),
        "bytes_first_last": [len(bodies[0]), len(bodies[-1])],
        "shared_prefix": [round(f, 3) for f in fractions],
        "median": round(statistics.median(fractions), 3),
        "below_90": sum(1 for f in fractions if f < 0.9),
        "prompt_tokens": sum(server.prompt),
        "cached_tokens": sum(server.cached),
        "minutes": round(turns * seconds_per_turn / 60, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--seconds-per-turn", type=float, default=25.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args.turns, args.seconds_per_turn))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['requests']} requests over {result['minutes']} min of bot time; "
        f"request bytes {result['bytes_first_last'][0]} -> {result['bytes_first_last'][1]}"
    )
    print("shared prefix / previous request, per turn:")
    print("  " + " ".join(f"{f:.0%}" for f in result["shared_prefix"]))
    print(
        f"median {result['median']:.1%}; below 90%: {result['below_90']} of "
        f"{len(result['shared_prefix'])}; cached tokens {result['cached_tokens']} of "
        f"{result['prompt_tokens']} prompt tokens "
        f"({result['cached_tokens'] / result['prompt_tokens']:.0%})"
    )


if __name__ == "__main__":
    main()
