"""Prefix stability of a group's requests with ambient context on and off (issue 40 §4).

A group chat of 20 addressed turns (`@bot ...`), each after `--chatter` messages the members
write among themselves (default 3), through a Bot built as `bot.py` builds one, with an
OpenAI-compatible model at bench_prefix.py's local capture server (which keeps each request's
raw bytes and reports cached tokens the way OpenAI does: whole 128-token blocks of the prefix a
request shares with the previous one, from 1024 tokens). The bot's clock is injected.

Modes: `on` (the default: chatter goes in a <background> block of the newest message), `off`
(a `chats:` rule sets `ambient: {enabled: false}`: chatter is not shown). Run on a checkout from
before ambient context (where chatter was ordinary history turns) with `--mode before`: no rule
is set, as that code knows no `ambient` key.

Printed per mode: the median share of each request's bytes that the previous request's prefix
covers, the turns below 90%, the cached share of all prompt tokens, and the request sizes.

    python bench/bench_ambient.py                 # on and off
    python bench/bench_ambient.py --mode before   # in a checkout from before ambient context
    python bench/bench_ambient.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from aiohttp import web  # noqa: E402
from bench_prefix import QUESTIONS, START, CaptureServer, common_prefix, install_clock  # noqa: E402

from chatfn.common.messages import IncomingMessage, OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402

TURNS = 20
GROUP = "group:offsite"
CHATTER = [
    ("Bo", "I would rather go somewhere with a lake, honestly."),
    ("Cy", "Last year the hotel food was terrible, let's not repeat that."),
    ("Di", "Can we avoid Mondays? Half the team has standups."),
    ("Bo", "Trains are fine but not with three changes."),
    ("Cy", "+1 for the lake, and bikes if possible."),
]


async def run(mode: str, turns: int, chatter: int, seconds: float) -> dict[str, Any]:
    server = CaptureServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    now = [START]
    rules = [{"match": {"chat_id": GROUP}, "ambient": {"enabled": False}}] if mode == "off" else []
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
                "chats": rules,
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

        said = 0
        for i in range(turns):
            for _ in range(chatter):
                name, text = CHATTER[said % len(CHATTER)]
                said += 1
                await bot.handle(_group(f"c{said}", name, text, at_bot=False), sink)
                now[0] += seconds / (chatter + 1)
            question = QUESTIONS[i % len(QUESTIONS)] + f" (#{i + 1})"
            await bot.handle(_group(f"m{i}", "Ann", question, at_bot=True), sink)
            now[0] += seconds / (chatter + 1)
        await bot.aclose()
    await runner.cleanup()
    bodies = server.bodies
    pairs = list(zip(bodies, bodies[1:], strict=False))
    fractions = [common_prefix(b, a) / len(a) for a, b in pairs]
    # What a turn can hope to share: the previous request up to its newest message (the
    # newest message carries the turn note, and the chatter block when ambient is on).
    stable = [a.rfind(b'{"role":"user"') for a, _b in pairs]
    kept = [min(1.0, common_prefix(b, a) / s) for (a, b), s in zip(pairs, stable, strict=True)]
    return {
        "mode": mode,
        "kept": [round(k, 3) for k in kept],
        "kept_median": round(statistics.median(kept), 3),
        "kept_whole": sum(1 for k in kept if k >= 1.0),
        "requests": len(bodies),
        "bytes_first_last": [len(bodies[0]), len(bodies[-1])],
        "shared_prefix": [round(f, 3) for f in fractions],
        "median": round(statistics.median(fractions), 3),
        "below_90": sum(1 for f in fractions if f < 0.9),
        "prompt_tokens": sum(server.prompt),
        "cached_tokens": sum(server.cached),
    }


def _group(ident: str, name: str, text: str, *, at_bot: bool) -> IncomingMessage:
    return IncomingMessage(
        platform="bench",
        chat_id=GROUP,
        sender_id=name.lower(),
        sender_name=name,
        text=text,
        is_group=True,
        is_at_bot=at_bot,
        message_id=ident,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["on", "off", "before"], action="append")
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--chatter", type=int, default=3, help="messages between turns")
    parser.add_argument("--seconds-per-turn", type=float, default=40.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [
        asyncio.run(run(mode, args.turns, args.chatter, args.seconds_per_turn))
        for mode in args.mode or ["on", "off"]
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.turns} addressed turns, {args.chatter} chatter messages before each")
    for r in results:
        n = len(r["shared_prefix"])
        print(
            f"ambient {r['mode']}: the previous request's part before its newest message "
            f"repeated whole in {r['kept_whole']} of {n} turns (median {r['kept_median']:.0%}); "
            f"shared prefix / previous request median {r['median']:.1%}, below 90%: "
            f"{r['below_90']} of {n}; cached tokens {r['cached_tokens']} of "
            f"{r['prompt_tokens']} ({r['cached_tokens'] / r['prompt_tokens']:.0%}); request "
            f"bytes {r['bytes_first_last'][0]} -> {r['bytes_first_last'][1]}"
        )
        print("  kept per turn:   " + " ".join(f"{f:.0%}" for f in r["kept"]))
        print("  shared per turn: " + " ".join(f"{f:.0%}" for f in r["shared_prefix"]))


if __name__ == "__main__":
    main()
