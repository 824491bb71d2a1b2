"""Soak under SIGKILL (issue 41): every message answered exactly once, in per-chat order, with
SQLite's group commit batching many chats' writes. Not a unit test; run by hand:

    python bench/soak_kill.py [--messages 20000] [--chats 500] [--concurrency 200]
                              [--kills 3] [--model-delay 0.2] [--out DIR]

What it does: starts `python bot.py --channel http` on a SQLite file and a fake
OpenAI-compatible model in this process that answers "ack <token>" after `--model-delay`
seconds. `--chats` clients each send their chat's messages one after another (the next once the
previous one's POST /v1/messages answered), `--concurrency` POSTs in flight at a time, while an
SSE receiver reads /v1/events (reconnecting with Last-Event-ID). The bot is SIGKILLed
`--kills` times, evenly spread over the run, and restarted a second later. A client whose POST
failed because the bot died waits for the restart and sends the message again only if the
database does not hold it (a client that cannot tell resends; one that can, does not): a stored
message is the bot's to answer, after the restart, from what it stored.

Counted afterwards, at the receiving side and in the database, per message: stored once, one
bot answer in the chat (`ack <token>` in the messages table), one SSE event carrying it; and per
chat: the answers, and the events, in the order the messages were sent. Prints a JSON report
(`report.json` in `--out` too, with the bot's log); exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from soak_outbox import Soak  # noqa: E402

from tests.fakes.cassette import openai_chat_response  # noqa: E402


class SlowModel:
    """Answers "ack <token>" (the last word of the last user message) after `delay` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.requests = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests += 1
        await asyncio.sleep(self.delay)
        last = body["messages"][-1]["content"]
        token = last.rsplit(" ", 1)[-1]
        return web.json_response(openai_chat_response(content=f"ack {token}"))


def text_of(chat: int, seq: int) -> str:
    return f"hello tok-{chat}-{seq}"


class KillSoak(Soak):
    """The outbox soak's bot process and SSE receiver, driven by per-chat ordered clients."""

    channels = ("http",)
    start_wait = 60.0  # a restart replays the turns a kill cut before /healthz answers

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        super().__init__(args, tmp)
        self.done = 0  # messages whose POST answered, or that were found stored after a kill
        self.resent = 0
        self.found_stored = 0
        self.kills = 0
        self.restart_s: list[float] = []

    def config(self) -> Path:
        cfg = {
            "storage": {"url": f"sqlite:///{self.db}"},
            "plugins": {"paths": []},
            "logging": {"level": self.args.log_level, "file": str(self.tmp / "bot.log")},
            # Each client is a person sending a message a second or faster: the loop guard
            # (bot.loop_guard) is for bots answering bots, not this.
            "bot": {"respond_in_groups": "always", "loop_guard": {"messages": 0}},
            "function_calls": {"total_timeout": 120},
            "models": {
                "fake": {
                    "provider": "openai",
                    "base_url": f"http://127.0.0.1:{self.model_port}/v1",
                    "api_key": "x",
                    "model": "fake",
                    "native_tools": True,
                    "timeout": 60,
                }
            },
            "channels": {"http": {"host": "127.0.0.1", "port": self.http_port}},
        }
        path = self.tmp / "config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def is_stored(self, text: str) -> bool:
        with sqlite3.connect(self.db, timeout=30) as c:
            row = c.execute(
                "SELECT 1 FROM messages WHERE role='user' AND text=? LIMIT 1", (text,)
            ).fetchone()
        return row is not None

    async def send(self, s: aiohttp.ClientSession, chat: int, seq: int) -> None:
        """One message, until the bot has it: a POST that answered, or found stored."""
        text = text_of(chat, seq)
        body = {"chat_id": f"c{chat}", "sender_id": f"u{chat}", "text": text}
        first = True
        while True:
            await self.up.wait()
            if not first:
                if await asyncio.to_thread(self.is_stored, text):
                    self.found_stored += 1
                    return
                self.resent += 1
            first = False
            try:
                async with s.post(f"http://127.0.0.1:{self.http_port}/v1/messages", json=body) as r:
                    await r.read()
                    if r.status == 200:
                        return
            except (TimeoutError, aiohttp.ClientError, ConnectionError):
                pass
            await asyncio.sleep(0.2)

    async def killer(self, n: int) -> None:
        marks = [n * (i + 1) // (self.args.kills + 1) for i in range(self.args.kills)]
        for mark in marks:
            while self.done < mark:
                await asyncio.sleep(0.05)
            assert self.proc is not None
            self.up.clear()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.kills += 1
            await asyncio.sleep(1)
            t0 = time.monotonic()
            await self.start_bot()
            self.restart_s.append(round(time.monotonic() - t0, 2))

    def answers(self) -> dict[str, list[str]]:
        """Each chat's bot answers in the order they were stored."""
        out: dict[str, list[str]] = collections.defaultdict(list)
        with sqlite3.connect(self.db, timeout=30) as c:
            rows = c.execute(
                "SELECT chat_id, text FROM messages WHERE role IN ('assistant','notice') "
                "ORDER BY id"
            )
            for chat_id, text in rows:
                out[chat_id].append(text or "")
        return out

    def stored_counts(self) -> collections.Counter[str]:
        with sqlite3.connect(self.db, timeout=30) as c:
            return collections.Counter(
                t for (t,) in c.execute("SELECT text FROM messages WHERE role='user'")
            )

    def settled_all(self, n: int) -> bool:
        with sqlite3.connect(self.db, timeout=30) as c:
            answered = c.execute(
                "SELECT count(*) FROM messages WHERE role IN ('assistant','notice')"
            ).fetchone()[0]
            pending = c.execute("SELECT count(*) FROM outbox WHERE state='pending'").fetchone()[0]
            last = c.execute("SELECT max(id) FROM outbox").fetchone()[0] or 0
        return answered >= n and pending == 0 and self.last_id >= last

    async def run(self) -> dict[str, Any]:  # type: ignore[override]
        args = self.args
        model = SlowModel(args.model_delay)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", model.chat)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.model_port).start()
        await self.start_bot()
        recv = asyncio.create_task(self.receiver())
        per_chat = args.messages // args.chats
        n = per_chat * args.chats
        sem = asyncio.Semaphore(args.concurrency)
        started = time.monotonic()

        async def client(s: aiohttp.ClientSession, chat: int) -> None:
            for seq in range(per_chat):
                async with sem:
                    await self.send(s, chat, seq)
                self.done += 1

        timeout = aiohttp.ClientTimeout(total=300)
        connector = aiohttp.TCPConnector(limit=args.concurrency)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as s:
            kill_task = asyncio.create_task(self.killer(n))
            await asyncio.gather(*(client(s, c) for c in range(args.chats)))
            await kill_task
        sent_s = time.monotonic() - started
        for _ in range(3000):  # until every message is answered and every event read (300 s)
            if await asyncio.to_thread(self.settled_all, n):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        elapsed = time.monotonic() - started
        report = self.check(n, per_chat, model, sent_s, elapsed)
        with (self.tmp / "sse.jsonl").open("w") as f:
            for eid, event in sorted(self.events.items()):
                f.write(json.dumps({"id": eid, **event}, ensure_ascii=False) + "\n")
        recv.cancel()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        report["exit_code_after_sigterm"] = self.proc.wait(60)
        await runner.cleanup()
        return report

    def check(
        self, n: int, per_chat: int, model: SlowModel, sent_s: float, elapsed: float
    ) -> dict[str, Any]:
        stored = self.stored_counts()
        answers = self.answers()
        events: dict[str, list[str]] = collections.defaultdict(list)
        for _eid, event in sorted(self.events.items()):
            events[str(event.get("chat_id"))].append(str(event.get("text") or ""))
        counts = {"stored_once": 0, "stored_twice_or_more": 0, "not_stored": 0}
        answered_once = answered_twice = unanswered = 0
        chats_in_order = events_in_order = chats_with_events_exactly_once = 0
        for chat in range(self.args.chats):
            expected = [f"ack tok-{chat}-{seq}" for seq in range(per_chat)]
            for seq in range(per_chat):
                k = stored[text_of(chat, seq)]
                counts[
                    "stored_once" if k == 1 else "not_stored" if k == 0 else "stored_twice_or_more"
                ] += 1
            got = answers.get(f"c{chat}", [])
            seen = collections.Counter(got)
            answered_once += sum(1 for e in expected if seen[e] == 1)
            answered_twice += sum(1 for e in expected if seen[e] > 1)
            unanswered += sum(1 for e in expected if seen[e] == 0)
            chats_in_order += got == expected
            got_events = events.get(f"c{chat}", [])
            events_in_order += got_events == expected
            chats_with_events_exactly_once += collections.Counter(
                got_events
            ) == collections.Counter(expected)
        with sqlite3.connect(self.db, timeout=30) as c:
            states = dict(c.execute("SELECT state, count(*) FROM outbox GROUP BY state"))
        report: dict[str, Any] = {
            "messages": n,
            "chats": self.args.chats,
            "concurrency": self.args.concurrency,
            "kills": self.kills,
            "restart_s": self.restart_s,
            "sent_s": round(sent_s, 1),
            "elapsed_s": round(elapsed, 1),
            "msg_per_s": round(n / sent_s, 1),
            "model_requests": model.requests,
            "resent_after_kill": self.resent,
            "found_stored_after_kill": self.found_stored,
            **counts,
            "answered_exactly_once": answered_once,
            "answered_twice_or_more": answered_twice,
            "unanswered": unanswered,
            "chats_answered_in_order": chats_in_order,
            "sse_events": len(self.events),
            "sse_duplicate_ids": self.event_dups,
            "chats_with_each_event_once": chats_with_events_exactly_once,
            "chats_with_events_in_order": events_in_order,
            "outbox_states": states,
        }
        chats = self.args.chats
        report["ok"] = (
            counts["stored_once"] == n
            and answered_once == n
            and chats_in_order == chats
            and chats_with_events_exactly_once == chats
            and events_in_order == chats
            and self.event_dups == 0
        )
        return report


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--chats", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--log-level", default="INFO", help="the bot's logging level")
    args = parser.parse_args()
    tmp = args.out or Path(tempfile.mkdtemp(prefix="chatfn-killsoak-"))
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"output: {tmp}", flush=True)
    soak = KillSoak(args, tmp)
    try:
        report = await soak.run()
    finally:
        if soak.proc is not None and soak.proc.poll() is None:
            soak.proc.kill()
    (tmp / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    asyncio.run(main())
