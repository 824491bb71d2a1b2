"""Soak: nothing lost, nothing stuck (issue 11). Not a unit test; run by hand:

    python bench/soak_outbox.py [--messages 2000] [--concurrency 200] [--out DIR]

What it does: starts `python bot.py --channel http --channel onebot` on a SQLite file, a fake
OpenAI-compatible model in this process that answers 500 or 429 to a third of requests (the
SDK retries, `max_retries: 2`), an SSE receiver on /v1/events that reconnects with
Last-Event-ID, and a OneBot peer (tests/channels/onebot/onebot_sim.py). It sends `--messages`
messages,
half over HTTP and half over OneBot, each in its own chat, `--concurrency` at a time, while:
- another process holds the SQLite write lock (BEGIN IMMEDIATE) for 10 s, twice;
- the bot is SIGKILLed once mid-run and restarted.
A message whose send failed because the bot was down (connection refused, socket closed) is
sent again after the restart, as a client would, unless the database already holds it. The
OneBot peer reconnects whenever its socket drops, as real implementations do.

Everything stays in the output directory (`--out`, default a new /tmp/chatfn-soak-*, printed
first): the database, the bot's log (`--log-level`, default INFO), `peer.jsonl` (every action
the peer answered), `sse.jsonl` (every event received) and `report.json`. The report is taken
once nothing is pending, every stored message has a bot message in its chat, the SSE receiver
read up to the last event and the peer has every OneBot row (or after 120 s).

Afterwards, counted at the receiving side: every chat's events by event id on /v1/events
(duplicate ids, more than one event per chat) and the OneBot peer's send_group_msg per group;
and in the database: each message stored once. Prints a JSON report (figures in README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import signal
import sqlite3
import subprocess
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

from tests.channels.onebot.onebot_sim import OneBotSim  # noqa: E402
from tests.fakes.cassette import openai_chat_response  # noqa: E402

LOCK = (
    "import sqlite3,sys,time\nc=sqlite3.connect(sys.argv[1],isolation_level=None)\n"
    "c.execute('BEGIN IMMEDIATE');print('locked',flush=True);time.sleep(float(sys.argv[2]))"
)

UNANSWERED = (
    "SELECT count(*) FROM messages u WHERE role='user' AND NOT EXISTS (SELECT 1 FROM "
    "messages a WHERE a.chat_id=u.chat_id AND a.role IN ('assistant','notice'))"
)


class FakeModel:
    """Answers "ack <token>"; a third of requests get 500 or 429."""

    def __init__(self) -> None:
        self.requests = 0
        self.failed = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests += 1
        if random.random() < 1 / 3:
            self.failed += 1
            status = random.choice([500, 429])
            return web.json_response(
                {"error": {"message": "busy"}}, status=status, headers={"retry-after-ms": "50"}
            )
        last = body["messages"][-1]["content"]
        token = last.rsplit(" ", 1)[-1]
        return web.json_response(openai_chat_response(content=f"ack {token}"))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Soak:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.db = tmp / "soak.db"
        self.http_port, self.onebot_port, self.model_port = free_port(), free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.up = asyncio.Event()
        self.events: dict[int, dict[str, Any]] = {}
        self.event_dups = 0
        self.last_id = 0
        self.http_retry: list[int] = []
        self.onebot_retry: list[int] = []
        self.kill_at: float | None = None
        # The peer reconnects when its socket drops, as NapCat / go-cqhttp do (every few
        # seconds); not while the soak has the bot down on purpose.
        self.peer_paused = False
        self.peer_reconnects = 0
        self.max_lag = 0.0  # this process's own event-loop lag (a stalled soak drops its peer)

    def config(self) -> Path:
        cfg = {
            "storage": {"url": f"sqlite:///{self.db}"},
            "plugins": {"paths": []},
            "logging": {"level": self.args.log_level, "file": str(self.tmp / "bot.log")},
            "bot": {"respond_in_groups": "always"},
            "function_calls": {"total_timeout": 60},
            "models": {
                "fake": {
                    "provider": "openai",
                    "base_url": f"http://127.0.0.1:{self.model_port}/v1",
                    "api_key": "x",
                    "model": "fake",
                    "native_tools": True,
                    "max_retries": 2,
                    "timeout": 30,
                }
            },
            "channels": {
                "http": {"host": "127.0.0.1", "port": self.http_port},
                "onebot": {
                    "host": "127.0.0.1",
                    "port": self.onebot_port,
                    "send_rate": 0,
                    "reconnect_wait": 2,
                },
            },
        }
        path = self.tmp / "config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    #: The channels the bot runs (`--channel` each); seconds its /healthz may take to answer.
    channels: tuple[str, ...] = ("http", "onebot")
    start_wait = 20.0

    async def start_bot(self) -> None:
        flags = [f for name in self.channels for f in ("--channel", name)]
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "bot.py"), "--config", str(self.config()), *flags],
            cwd=self.tmp,
            stdout=subprocess.DEVNULL,
            stderr=(self.tmp / "bot.stderr").open("ab"),  # a start that fails says why there
        )
        async with aiohttp.ClientSession() as s:
            for _ in range(int(self.start_wait / 0.05)):
                try:
                    async with s.get(f"http://127.0.0.1:{self.http_port}/healthz") as r:
                        if r.status == 200:
                            self.up.set()
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError("bot did not start")

    async def receiver(self) -> None:
        """/v1/events, reconnecting with Last-Event-ID; every event by id."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as s:
            while True:
                await self.up.wait()
                try:
                    headers = {"Last-Event-ID": str(self.last_id)}
                    async with s.get(
                        f"http://127.0.0.1:{self.http_port}/v1/events", headers=headers
                    ) as r:
                        eid = None
                        async for raw in r.content:
                            line = raw.decode().rstrip("\n")
                            if line.startswith("id: "):
                                eid = int(line[4:])
                            elif line.startswith("data: ") and eid is not None:
                                if eid in self.events:
                                    self.event_dups += 1
                                self.events[eid] = json.loads(line[6:])
                                self.last_id = max(self.last_id, eid)
                                eid = None
                except (aiohttp.ClientError, ConnectionError):
                    pass
                await asyncio.sleep(0.2)

    async def send_http(self, s: aiohttp.ClientSession, i: int) -> None:
        body = {"chat_id": f"h{i}", "sender_id": "u", "text": f"hello tok-h{i}"}
        try:
            async with s.post(f"http://127.0.0.1:{self.http_port}/v1/messages", json=body) as r:
                if r.status != 200:
                    self.http_retry.append(i)
                else:
                    await r.read()
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            self.http_retry.append(i)

    async def send_onebot(self, sim: OneBotSim, i: int) -> None:
        if not sim.connected:
            self.onebot_retry.append(i)
            return
        await sim.group_message(100000 + i, 5000 + i, f"hello tok-o{i}")

    async def peer_watchdog(self, sim: OneBotSim) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.up.is_set() and not self.peer_paused and not sim.connected:
                await sim.close()
                try:
                    await sim.connect()
                    self.peer_reconnects += 1
                except (aiohttp.ClientError, OSError):
                    pass

    async def lag_monitor(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.1)
            self.max_lag = max(self.max_lag, loop.time() - before - 0.1)

    async def lock_db(self, seconds: float) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCK, str(self.db), str(seconds), stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        await proc.stdout.readline()
        await proc.wait()

    async def run(self) -> dict[str, Any]:
        model = FakeModel()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", model.chat)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.model_port).start()
        await self.start_bot()
        recv = asyncio.create_task(self.receiver())
        sim = OneBotSim(f"ws://127.0.0.1:{self.onebot_port}/onebot/v11/ws", 10001000)
        await sim.connect()
        watchdog = asyncio.create_task(self.peer_watchdog(sim))
        lag = asyncio.create_task(self.lag_monitor())
        n, conc = self.args.messages, self.args.concurrency
        sem = asyncio.Semaphore(conc)
        started = time.monotonic()

        async def one(i: int, s: aiohttp.ClientSession) -> None:
            # Paced over --duration seconds so the locks and the kill meet live traffic.
            await asyncio.sleep(i * self.args.duration / n)
            async with sem:
                if i % 2 == 0:
                    await self.send_http(s, i)
                else:
                    await self.send_onebot(sim, i)
                    await asyncio.sleep(0.01)

        async def chaos() -> None:
            await asyncio.sleep(2)
            await self.lock_db(10)
            await asyncio.sleep(2)
            assert self.proc is not None
            self.up.clear()
            self.peer_paused = True
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            await sim.close()
            await asyncio.sleep(1)
            await self.start_bot()
            self.peer_paused = False  # the watchdog connects it
            await asyncio.sleep(3)
            await self.lock_db(10)

        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(timeout=timeout) as s:
            chaos_task = asyncio.create_task(chaos())
            await asyncio.gather(*(one(i, s) for i in range(n)))
            await chaos_task
            # Resend what failed while the bot was down, unless it was stored after all.
            stored = self.stored_texts()
            http_again = [i for i in self.http_retry if f"hello tok-h{i}" not in stored]
            ob_again = [i for i in self.onebot_retry if f"hello tok-o{i}" not in stored]

            async def again(i: int) -> None:
                async with sem:
                    await self.send_http(s, i)

            await asyncio.gather(*(again(i) for i in http_again))
            for i in ob_again:
                while not sim.connected:
                    await asyncio.sleep(0.1)
                await self.send_onebot(sim, i)
        # Let the turns in flight finish and the outbox drain: until no row is pending, every
        # stored message has a bot message in its chat, the SSE receiver has read up to the
        # last event and the peer got every OneBot row (or 120 s pass). Counting earlier
        # counts turns still running as unanswered (runs 1-4 did: the resent OneBot messages
        # were still in their turns when the report was taken).
        for _ in range(1200):
            if self.settled(sim):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)
        elapsed = time.monotonic() - started
        report = self.report(sim, model, http_again, ob_again, elapsed)
        # What the peer saw, for diagnosis: every action it answered, in order.
        with (self.tmp / "peer.jsonl").open("w") as f:
            for action in sim.actions:
                f.write(json.dumps(action, ensure_ascii=False) + "\n")
        with (self.tmp / "sse.jsonl").open("w") as f:
            for eid, event in sorted(self.events.items()):
                f.write(json.dumps({"id": eid, **event}, ensure_ascii=False) + "\n")
        recv.cancel()
        watchdog.cancel()
        lag.cancel()
        report["peer_socket_ends"] = [f"{code} {exc}" for code, exc in sim.drops]
        report["peer_reconnects_by_itself"] = self.peer_reconnects - 1  # less the restart's
        report["soak_loop_max_lag_s"] = round(self.max_lag, 2)
        await sim.close()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        report["exit_code_after_sigterm"] = self.proc.wait(30)
        await runner.cleanup()
        return report

    def stored_texts(self) -> collections.Counter[str]:
        with sqlite3.connect(self.db, timeout=30) as c:
            return collections.Counter(
                t for (t,) in c.execute("SELECT text FROM messages WHERE role='user'")
            )

    def pending(self) -> int:
        with sqlite3.connect(self.db, timeout=30) as c:
            return c.execute("SELECT count(*) FROM outbox WHERE state='pending'").fetchone()[0]

    def settled(self, sim: OneBotSim) -> bool:
        with sqlite3.connect(self.db, timeout=30) as c:
            last = c.execute("SELECT max(id) FROM outbox").fetchone()[0] or 0
            unanswered = c.execute(UNANSWERED).fetchone()[0]
        return (
            self.pending() == 0
            and unanswered == 0
            and self.last_id >= last
            and len(self.onebot_replies(sim)) >= self.answered_onebot()
        )

    def answered_onebot(self) -> int:
        with sqlite3.connect(self.db, timeout=30) as c:
            return c.execute("SELECT count(*) FROM outbox WHERE platform='onebot'").fetchone()[0]

    @staticmethod
    def onebot_replies(sim: OneBotSim) -> list[dict[str, Any]]:
        return sim.sent("send_group_msg")

    def report(
        self,
        sim: OneBotSim,
        model: FakeModel,
        http_again: list[int],
        ob_again: list[int],
        elapsed: float,
    ) -> dict[str, Any]:
        n = self.args.messages
        stored = self.stored_texts()
        per_chat: collections.Counter[str] = collections.Counter(
            e["chat_id"] for e in self.events.values()
        )
        http_chats = [f"h{i}" for i in range(0, n, 2)]
        ob_groups: collections.Counter[str] = collections.Counter(
            str(a["params"]["group_id"]) for a in self.onebot_replies(sim)
        )
        with sqlite3.connect(self.db, timeout=30) as c:
            states = dict(c.execute("SELECT state, count(*) FROM outbox GROUP BY state"))
            unanswered = c.execute(UNANSWERED).fetchone()[0]
        texts = [f"hello tok-{'h' if i % 2 == 0 else 'o'}{i}" for i in range(n)]
        return {
            "messages": n,
            "elapsed_s": round(elapsed, 1),
            "model_requests": model.requests,
            "model_errors_500_429": model.failed,
            "resent_after_kill": {"http": len(http_again), "onebot": len(ob_again)},
            "stored_once": sum(1 for t in texts if stored[t] == 1),
            "stored_twice_or_more": sum(1 for t in texts if stored[t] > 1),
            "not_stored": sum(1 for t in texts if stored[t] == 0),
            "stored_no_bot_message_in_chat": unanswered,
            "sse_events": len(self.events),
            "sse_duplicate_ids": self.event_dups,
            "http_chats_with_exactly_one_event": sum(1 for c in http_chats if per_chat[c] == 1),
            "http_chats_with_more_than_one": sum(1 for c in http_chats if per_chat[c] > 1),
            "http_chats_with_none": sum(1 for c in http_chats if per_chat[c] == 0),
            "onebot_groups_with_exactly_one_send": sum(1 for g in ob_groups.values() if g == 1),
            "onebot_groups_with_more_than_one": sum(1 for g in ob_groups.values() if g > 1),
            "onebot_sends": sum(ob_groups.values()),
            "outbox_states": states,
        }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds to spread sends")
    parser.add_argument(
        "--out", help="directory kept for the database, config, bot log and report (default: new)"
    )
    parser.add_argument("--log-level", default="INFO", help="the bot's logging level")
    args = parser.parse_args()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chatfn-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"soak output (database, bot.log, peer.jsonl, report.json): {out}", file=sys.stderr)
    soak = Soak(args, out)
    report = await soak.run()
    text = json.dumps(report, indent=2)
    (out / "report.json").write_text(text)
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
