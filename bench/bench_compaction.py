"""Compaction over a long conversation: prefix stability and the tokens sent, with and without
compaction (issue 22).

A 60-turn conversation in one private chat, through a Bot built as `bot.py` builds one, with an
OpenAI-compatible model at a local capture server (bench_prefix.py's, which reports cached
tokens as OpenAI does: whole 128-token blocks of the prefix shared with the previous request,
once it reaches 1024 tokens). `bot.history_size: 200`, so the model's `context_tokens`
(default 6000 here) is what bounds the history, and the conversation crosses it. The
questions are longer than bench_prefix.py's (a paragraph each), as in a real discussion.

Run twice: with `bot.compaction: true` (the oldest turns are summarised when the history stops
fitting; the capture server answers the summary request with a summary of `--summary-words`
words) and with `false` (the oldest turns are left out, in blocks, as before compaction).

Printed for each: chat requests, summary requests, the shared prefix of each chat request with
the previous chat request (median, turns below 90%), the cached share of prompt tokens, and the
prompt tokens sent (chat and summary requests apart).

    python bench/bench_compaction.py
    python bench/bench_compaction.py --turns 60 --context-tokens 6000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from aiohttp import web  # noqa: E402
from bench_prefix import START, answer, common_prefix  # noqa: E402

from chatfn.common.messages import IncomingMessage, OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from function_calls.compaction import SUMMARISE  # noqa: E402

SUMMARY_HEAD = SUMMARISE.split(".")[0].encode()
TOPICS = [
    "the venue for the offsite, which has to be reachable by train within two hours",
    "the budget per person, including two nights, meals and one shared dinner",
    "activities that work for a mix of introverts and extroverts in a team of twelve",
    "how to split the time between work sessions, free time and the travel itself",
    "what to prepare beforehand so that the two days are not spent on logistics",
]


def question(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"Turn {i + 1}: let us go back to {topic}. Last time we talked about it, we did not "
        "settle it, and people keep asking me. Could you lay out the options again, say which "
        "one you would pick and why, and what we would need to decide by the end of this week "
        "so that nobody has to chase anyone? Keep it short, I will forward it to the group."
    )


class Capture:
    """bench_prefix's capture server, with chat and summary requests told apart."""

    def __init__(self, summary_words: int) -> None:
        self.chat: list[bytes] = []
        self.cached: list[int] = []
        self.summaries: list[bytes] = []
        self.summary_words = summary_words

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        prompt_tokens = len(raw) // 4
        if SUMMARY_HEAD in raw:
            self.summaries.append(raw)
            words = " ".join(f"point{k}" for k in range(self.summary_words))
            text, cached = f"Summary {len(self.summaries)}: {words}", 0
        else:
            shared = common_prefix(raw, self.chat[-1]) if self.chat else 0
            cached = (shared // 4) // 128 * 128 if shared // 4 >= 1024 else 0
            self.chat.append(raw)
            self.cached.append(cached)
            text = answer(len(self.chat))
        return web.json_response(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
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


async def run(turns: int, context_tokens: int, compaction: bool, summary_words: int) -> dict:
    capture = Capture(summary_words)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", capture.handle)
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
                        "context_tokens": context_tokens,
                    }
                },
                "bot": {
                    "history_size": 200,
                    "timezone": "Europe/Berlin",
                    "compaction": compaction,
                },
                "storage": {"url": f"sqlite:///{Path(tmp) / 'bench.db'}"},
                "plugins": {"paths": []},
                "logging": {"level": "WARNING"},
            },
            base_dir=Path(tmp),
        )
        from loguru import logger

        logger.remove()
        bot = Bot(settings, clock=lambda: now[0])

        async def sink(_out: OutgoingMessage) -> None:
            return None

        for i in range(turns):
            msg = IncomingMessage(
                platform="bench",
                chat_id="private:ann",
                sender_id="ann",
                sender_name="Ann",
                text=question(i),
                is_group=False,
                message_id=f"m{i}",
            )
            await bot.handle(msg, sink)
            now[0] += 25
        await bot.aclose()
    await runner.cleanup()
    chat = capture.chat
    fractions = [common_prefix(b, a) / len(a) for a, b in zip(chat, chat[1:], strict=False)]
    chat_tokens = sum(len(b) // 4 for b in chat)
    summary_tokens = sum(len(b) // 4 for b in capture.summaries)
    return {
        "compaction": compaction,
        "chat_requests": len(chat),
        "summary_requests": len(capture.summaries),
        "bytes_first_last": [len(chat[0]), len(chat[-1])],
        "shared_prefix": [round(f, 3) for f in fractions],
        "median": round(statistics.median(fractions), 3),
        "below_90": sum(1 for f in fractions if f < 0.9),
        "chat_prompt_tokens": chat_tokens,
        "summary_prompt_tokens": summary_tokens,
        "cached_tokens": sum(capture.cached),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--context-tokens", type=int, default=6000)
    parser.add_argument("--summary-words", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [
        asyncio.run(run(args.turns, args.context_tokens, on, args.summary_words))
        for on in (True, False)
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        total = r["chat_prompt_tokens"] + r["summary_prompt_tokens"]
        print(
            f"compaction {'on ' if r['compaction'] else 'off'}: {r['chat_requests']} chat + "
            f"{r['summary_requests']} summary requests; request bytes "
            f"{r['bytes_first_last'][0]} -> {r['bytes_first_last'][1]}"
        )
        print("  shared prefix / previous chat request:")
        print("  " + " ".join(f"{f:.0%}" for f in r["shared_prefix"]))
        print(
            f"  median {r['median']:.1%}; below 90%: {r['below_90']} of "
            f"{len(r['shared_prefix'])}; cached {r['cached_tokens']} of "
            f"{r['chat_prompt_tokens']} chat prompt tokens "
            f"({r['cached_tokens'] / r['chat_prompt_tokens']:.0%}); prompt tokens sent "
            f"{total} ({r['chat_prompt_tokens']} chat + {r['summary_prompt_tokens']} summary)"
        )


if __name__ == "__main__":
    main()
