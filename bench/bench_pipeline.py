"""chatfn's whole pipeline against the raw `openai` SDK, on the same two requests.

Each "message" is one user question that costs two Chat Completions requests: request 1 (with
the tool definition) is answered with a call to `get_weather`; the function runs; request 2
(with the tool result appended) is answered with the final text. A fake OpenAI-compatible server
(bench/fake_openai.py) answers both, in a separate process so its CPU is not counted.

Contenders:
  raw     the minimal hand-written loop: `AsyncOpenAI.chat.completions.create` with the tool,
          parse the call, run a trivial Python function, `create` again with the result.
  chatfn  `Bot.handle()`: history stored in a real SQLite file, router, tool loop, executor
          (validation into the pydantic model, timeout, audit row), reply stored and delivered.

Measurements:
  sequential  process CPU ms per message (`time.process_time()`, all threads of this process)
              over N messages after a warm-up, 0 ms server latency; repeated, contenders
              interleaved, and the median kept.
  concurrent  1000 messages, 200 in flight (semaphore), 200 ms server latency: messages/s (wall),
              after one warm-up wave; repeated with alternating order, median kept.
  Every message has its own chat id (the Bot serialises messages of one chat, and a growing
  history would make chatfn's requests bigger than raw's).

Targets (issue 2): chatfn/raw CPU <= 1.5, chatfn/raw throughput >= 0.7.

Run: `python bench/bench_pipeline.py` (about a minute); `--json` for machine-readable output;
`--profile chatfn` prints where chatfn's CPU goes (cProfile, per message).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openai import AsyncOpenAI  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from bench.fake_openai import FINAL_TEXT, TOOL_NAME, ServerProcess  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.logging import setup_logging  # noqa: E402
from chatfn.runtime.settings import DEFAULT_SYSTEM_PROMPT, parse_settings  # noqa: E402
from function_calls.context import IncomingMessage, MessageContext, OutgoingMessage  # noqa: E402
from function_calls.registry import Registry, tool_function  # noqa: E402
from function_calls.spec import FunctionResult  # noqa: E402
from providers.schema import openai_plain_parameters  # noqa: E402

MODEL = "gpt-4o-mini"
QUESTION = "What's the weather in Paris right now?"
# Issue 27 (with the outbox, limits and usage rows on); issue 2 had set 1.5.
TARGET_CPU_RATIO = 1.0
TARGET_THROUGHPUT_RATIO = 0.7

Runner = Callable[[int], Awaitable[str]]
# --admin: a console user (a cheap hash: nobody logs in during the benchmark).
ADMIN_HASH = "scrypt$256$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
BENCH_LIMITS = {
    "per_user": {
        "messages_per_minute": 10**6,
        "model_calls_per_day": 10**9,
        "tokens_per_day": 10**12,
    },
    "per_chat": {"messages_per_minute": 10**6},
}


# -- the function both contenders run -------------------------------------------------------


class WeatherArgs(BaseModel):
    city: str = Field(description="City name, e.g. Paris")


WEATHER_DESCRIPTION = "Current weather for a city."


def weather_for(city: str) -> str:
    """The 'work' of the function: trivial on purpose, so only the plumbing is measured."""
    return json.dumps({"city": city, "temp_c": 18, "sky": "sunny"})


def weather_schema() -> dict[str, Any]:
    """The same JSON schema chatfn's registry derives from WeatherArgs, so both contenders send
    byte-for-byte comparable tool definitions."""
    return openai_plain_parameters(WeatherArgs.model_json_schema())


# -- contender (a): the raw SDK -------------------------------------------------------------


class RawContender:
    """The minimal hand-written tool loop on one shared AsyncOpenAI client."""

    name = "raw"

    def __init__(self, base_url: str, *, aiohttp: bool = False) -> None:
        # Same retry and timeout settings as chatfn's ModelConfig defaults; SDK default pool.
        # aiohttp: the SDK's own aiohttp transport (`DefaultAioHttpClient`), the one chatfn
        # uses by default, so the two loops differ only by what the bot does.
        extra: dict[str, Any] = {}
        if aiohttp:
            from openai import DefaultAioHttpClient

            extra["http_client"] = DefaultAioHttpClient(timeout=60.0)
        self.client = AsyncOpenAI(
            api_key="bench", base_url=base_url, max_retries=2, timeout=60.0, **extra
        )
        self.tools: list[dict[str, Any]] = [
            {
                "type": "function",
                "function": {
                    "name": TOOL_NAME,
                    "description": WEATHER_DESCRIPTION,
                    "parameters": weather_schema(),
                },
            }
        ]
        # A system prompt of the same size as chatfn's (which adds time and place lines).
        self.system = (
            DEFAULT_SYSTEM_PROMPT.replace("{bot_name}", "chatfn")
            + "\nCurrent time: 2025-01-01 12:00 (Wednesday), time zone UTC (UTC+0000)."
            + "\nYou are in a private chat, talking to Bench User."
        )

    async def message(self, i: int) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": QUESTION},
        ]
        first = await self.client.chat.completions.create(
            model=MODEL, messages=messages, tools=self.tools
        )  # type: ignore[arg-type]
        reply = first.choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in reply.tool_calls
                ],
            }
        )
        for call in reply.tool_calls:
            args = json.loads(call.function.arguments or "{}")
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": weather_for(**args)}
            )
        second = await self.client.chat.completions.create(
            model=MODEL, messages=messages, tools=self.tools
        )  # type: ignore[arg-type]
        return second.choices[0].message.content or ""

    async def aclose(self) -> None:
        await self.client.close()


class RawPostContender(RawContender):
    """The same hand-written loop through `client.post(..., cast_to=object)`: plain dicts in and
    out, the HTTP path chatfn's OpenAI adapter uses. Not one of the two contenders the targets
    compare; it separates chatfn's own pipeline cost (chatfn - raw_post) from the cost of the
    SDK's typed `create()` (raw - raw_post), which chatfn's adapter does not pay."""

    name = "raw_post"

    async def message(self, i: int) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": QUESTION},
        ]
        body = {"model": MODEL, "messages": messages, "tools": self.tools}
        first: Any = await self.client.post("/chat/completions", body=body, cast_to=object)
        reply = first["choices"][0]["message"]
        calls = reply.get("tool_calls") or []
        if not calls:
            return reply.get("content") or ""
        messages.append({"role": "assistant", "tool_calls": calls})
        for call in calls:
            args = json.loads(call["function"]["arguments"] or "{}")
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": weather_for(**args)}
            )
        second: Any = await self.client.post("/chat/completions", body=body, cast_to=object)
        return second["choices"][0]["message"].get("content") or ""


# -- contender (b): the chatfn pipeline -----------------------------------------------------


class _NullStream:
    """Log sink that formats every line (that cost is the framework's) but writes nowhere, so
    terminal speed does not enter the figures."""

    def write(self, _text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class ChatfnContender:
    """A Bot as `bot.py` would build it: model from settings (one AsyncOpenAI inside the
    adapter, reused), SQLite file storage, INFO logging, one registered function."""

    name = "chatfn"

    def __init__(
        self,
        base_url: str,
        db_dir: Path,
        *,
        logs: str = "null",
        sync_handler: bool = False,
        limits: bool = True,
        admin: bool = False,
        http_transport: str = "aiohttp",
    ) -> None:
        registry = Registry()
        with registry.collecting():
            if sync_handler:
                # A plain `def` handler runs in a worker thread (asyncio.to_thread), because it
                # may block; --sync-handler measures what that hop costs.
                @tool_function(name=TOOL_NAME, description=WEATHER_DESCRIPTION)
                def get_weather_sync(ctx: MessageContext, args: WeatherArgs) -> FunctionResult:
                    return FunctionResult(llm_content=weather_for(args.city))
            else:

                @tool_function(name=TOOL_NAME, description=WEATHER_DESCRIPTION)
                async def get_weather(ctx: MessageContext, args: WeatherArgs) -> FunctionResult:
                    return FunctionResult(llm_content=weather_for(args.city))

        settings = parse_settings(
            {
                "models": {
                    "default": {
                        "provider": "openai",
                        "base_url": base_url,
                        "api_key": "bench",
                        "model": MODEL,
                        "native_tools": True,
                        "http_transport": http_transport,
                    }
                },
                "storage": {"url": f"sqlite:///{db_dir / 'bench.db'}"},
                "plugins": {"paths": []},
                "logging": {"level": "INFO"},
                # Limits on (issue 27): every message is counted, and every model request's
                # call and tokens; set high enough never to refuse.
                **({"limits": BENCH_LIMITS} if limits else {}),
                # --admin: the web admin console configured and served (its HTTP channel
                # started in `start`), as a bot with the console on runs.
                **({"admin": {"users": {"bench": {"password_hash": ADMIN_HASH}}}} if admin else {}),
            },
            base_dir=db_dir,
        )
        if logs == "off":
            from loguru import logger

            logger.remove()
        elif logs == "null":
            setup_logging(settings, stream=_NullStream())
        else:
            setup_logging(settings)
        # builtins off: `help` would add a second tool and make request 1 bigger than raw's.
        self.bot = Bot(settings, registry=registry, builtins=False, load_plugins=False)
        self.admin = admin
        self.channel: Any = None

    async def start(self) -> None:
        """With the console on: the HTTP channel that serves it, listening (the console's
        routes mounted, its event-loop lag monitor running), though the messages measured
        still come through `Bot.handle` as for the plain contender."""
        if self.admin:
            from chatfn.channels.http.channel import HttpChannel

            self.channel = HttpChannel(self.bot.channel_host, bind="127.0.0.1", port=0)
            await self.channel.start()
            assert self.channel.admin is not None

    async def message(self, i: int) -> str:
        msg = IncomingMessage(
            platform="bench",
            chat_id=f"chat-{i}",
            sender_id="u1",
            sender_name="Bench User",
            text=QUESTION,
            message_id=f"m{i}",
        )
        sent = await self.bot.handle(msg, _discard)
        return sent[-1].text if sent else ""

    async def aclose(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
        await self.bot.aclose()


async def _discard(_out: OutgoingMessage) -> None:
    """The channel: delivery itself is not what is measured."""


# -- measurement ----------------------------------------------------------------------------


@dataclass
class Figures:
    contender: str
    cpu_ms_per_msg: float = 0.0  # median of the sequential runs
    cpu_ms_per_msg_min: float = 0.0  # best run: the least disturbed by other load
    seq_wall_ms_per_msg: float = 0.0
    cpu_runs: list[float] | None = None
    msgs_per_s: float = 0.0
    rate_runs: list[float] | None = None
    conc_cpu_ms_per_msg: float = 0.0


def _control(root: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(
        root + path, data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def _check(answer: str, who: str) -> None:
    if answer != FINAL_TEXT:
        raise RuntimeError(f"{who} answered {answer!r}, expected the fake server's final text")


class Counter:
    """Hands out message numbers, so chat ids never repeat across phases."""

    def __init__(self) -> None:
        self.n = 0

    def take(self, k: int) -> range:
        start = self.n
        self.n += k
        return range(start, self.n)


async def sequential(
    run: Runner,
    ids: Counter,
    n: int,
    warmup: int,
    who: str,
    profile: cProfile.Profile | None = None,
) -> tuple[float, float]:
    """(CPU ms/msg, wall ms/msg) over `n` messages one after another."""
    for i in ids.take(warmup):
        _check(await run(i), who)
    gc.collect()
    if profile is not None:
        profile.enable()
    c0, w0 = time.process_time(), time.perf_counter()
    for i in ids.take(n):
        _check(await run(i), who)
    c1, w1 = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.disable()
    return (c1 - c0) * 1000 / n, (w1 - w0) * 1000 / n


async def concurrent(
    run: Runner, ids: Counter, total: int, concurrency: int, who: str
) -> tuple[float, float]:
    """(messages/s wall, CPU ms/msg) for `total` messages with `concurrency` in flight."""
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            _check(await run(i), who)

    # Warm-up: one full wave, so connection set-up to the fake server is not in the figure.
    await asyncio.gather(*(one(i) for i in ids.take(concurrency)))
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in ids.take(total)))
    c1, w1 = time.process_time(), time.perf_counter()
    return total / (w1 - w0), (c1 - c0) * 1000 / total


def _print_profile(profile: cProfile.Profile, n: int, who: str, top: int) -> None:
    """The hottest functions, in ms per message (cProfile inflates every call, so read the
    shares, not the absolute numbers)."""
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    total = stats.total_tt * 1000 / n  # type: ignore[attr-defined]
    rows = []
    for (file, line, fn), (_cc, ncalls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tt * 1000 / n, ct * 1000 / n, ncalls / n, f"{_short(file)}:{line}({fn})"))
    print(f"\n== cProfile, {who}: {total:.2f} ms/msg under the profiler ==")
    for title, key in (("self time", 0), ("cumulative", 1)):
        print(f"-- top {top} by {title} (ms/msg, calls/msg) --")
        for tt, ct, calls, where in sorted(rows, key=lambda r: r[key], reverse=True)[:top]:
            print(f"{tt:8.3f} self {ct:8.3f} cum {calls:7.1f}x  {where}")


def _short(file: str) -> str:
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


async def run_all(args: argparse.Namespace) -> dict[str, Any]:
    with ServerProcess(latency_ms=0) as server, tempfile.TemporaryDirectory() as tmp:
        raw = RawContender(server.url)
        raw_aio = RawContender(server.url, aiohttp=True) if args.raw_aiohttp else None
        raw_post = RawPostContender(server.url)
        chatfn = ChatfnContender(
            server.url,
            Path(tmp),
            logs=args.logs,
            sync_handler=args.sync_handler,
            limits=not args.no_limits,
            http_transport=args.http_transport,
        )
        contenders: list[tuple[str, Runner]] = [("raw", raw.message), ("chatfn", chatfn.message)]
        # raw_post runs in the sequential phase only (it explains the CPU figure; the targets
        # compare raw and chatfn).
        seq_contenders = contenders + ([] if args.no_raw_post else [("raw_post", raw_post.message)])
        if raw_aio is not None:  # the raw loop on the same HTTP stack as chatfn's
            seq_contenders.append(("raw_aiohttp", raw_aio.message))
        admin = None
        if args.admin:  # the same bot with the admin console on, interleaved with the others
            (Path(tmp) / "admin").mkdir()
            admin = ChatfnContender(
                server.url,
                Path(tmp) / "admin",
                logs=args.logs,
                sync_handler=args.sync_handler,
                limits=not args.no_limits,
                admin=True,
            )
            await admin.start()
            seq_contenders.append(("chatfn_admin", admin.message))
        figures = {name: Figures(name, cpu_runs=[]) for name, _ in seq_contenders}
        ids = Counter()
        try:
            if not args.skip_sequential:
                _control(server.root, "/_bench/latency", {"ms": args.seq_latency_ms})
                walls: dict[str, list[float]] = {name: [] for name, _ in seq_contenders}
                # Interleaved repeats: drift (thermal, neighbours) hits both contenders alike.
                for _ in range(args.repeats):
                    for name, run in seq_contenders:
                        cpu, wall = await sequential(run, ids, args.n, args.warmup, name)
                        figures[name].cpu_runs.append(cpu)  # type: ignore[union-attr]
                        walls[name].append(wall)
                for name, _ in seq_contenders:
                    f = figures[name]
                    f.cpu_ms_per_msg = statistics.median(f.cpu_runs or [0.0])
                    f.cpu_ms_per_msg_min = min(f.cpu_runs or [0.0])
                    f.seq_wall_ms_per_msg = statistics.median(walls[name])
            if not args.skip_concurrent:
                _control(server.root, "/_bench/latency", {"ms": args.latency_ms})
                rates: dict[str, list[float]] = {name: [] for name, _ in contenders}
                cpus: dict[str, list[float]] = {name: [] for name, _ in contenders}
                for k in range(args.conc_repeats):
                    # Alternate who goes first: on a shared 2-core machine, load from elsewhere
                    # should not always fall on the same contender.
                    order = contenders if k % 2 == 0 else contenders[::-1]
                    for name, run in order:
                        rate, cpu = await concurrent(
                            run, ids, args.messages, args.concurrency, name
                        )
                        rates[name].append(rate)
                        cpus[name].append(cpu)
                for name, _ in contenders:
                    figures[name].msgs_per_s = statistics.median(rates[name])
                    figures[name].rate_runs = rates[name]
                    figures[name].conc_cpu_ms_per_msg = statistics.median(cpus[name])
            if args.profile:
                _control(server.root, "/_bench/latency", {"ms": args.seq_latency_ms})
                run = dict(seq_contenders)[args.profile]
                prof = cProfile.Profile()
                await sequential(run, ids, args.n, args.warmup, args.profile, profile=prof)
                _print_profile(prof, args.n, args.profile, args.top)
            stats = _control(server.root, "/_bench/stats")
        finally:
            await raw.aclose()
            if raw_aio is not None:
                await raw_aio.aclose()
            await raw_post.aclose()
            await chatfn.aclose()
            if admin is not None:
                await admin.aclose()
    return _report(args, figures, stats)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if a and b else None


def _report(
    args: argparse.Namespace, figures: dict[str, Figures], stats: dict[str, Any]
) -> dict[str, Any]:
    raw, fn = figures["raw"], figures["chatfn"]
    cpu_ratio = _ratio(fn.cpu_ms_per_msg, raw.cpu_ms_per_msg)
    cpu_ratio_min = _ratio(fn.cpu_ms_per_msg_min, raw.cpu_ms_per_msg_min)
    post = figures.get("raw_post")
    overhead = (
        round(fn.cpu_ms_per_msg - post.cpu_ms_per_msg, 3)
        if post and post.cpu_ms_per_msg and fn.cpu_ms_per_msg
        else None
    )
    tput_ratio = _ratio(fn.msgs_per_s, raw.msgs_per_s)
    raw_aio = figures.get("raw_aiohttp")
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor(),
            # The 1-minute load average at the end: on a shared machine, anything much
            # above 1 (this benchmark plus its server) means the figures are noisy.
            "loadavg_1m": round(os.getloadavg()[0], 2),
        },
        "settings": {
            "n": args.n,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "seq_latency_ms": args.seq_latency_ms,
            "messages": args.messages,
            "concurrency": args.concurrency,
            "latency_ms": args.latency_ms,
            "conc_repeats": args.conc_repeats,
            "logs": args.logs,
            "sync_handler": args.sync_handler,
            "http_transport": args.http_transport,
        },
        "results": {name: asdict(f) for name, f in figures.items()},
        "ratios": {
            "cpu": cpu_ratio,
            "cpu_best_runs": cpu_ratio_min,
            "throughput": tput_ratio,
            "cpu_vs_raw_post": _ratio(fn.cpu_ms_per_msg, post.cpu_ms_per_msg if post else 0.0),
            "cpu_vs_raw_aiohttp": _ratio(
                fn.cpu_ms_per_msg, raw_aio.cpu_ms_per_msg if raw_aio else 0.0
            ),
        },
        # chatfn's own cost per message, on the same HTTP path (chatfn - raw_post CPU ms/msg).
        "pipeline_overhead_ms": overhead,
        "targets": {
            "cpu_max": TARGET_CPU_RATIO,
            "throughput_min": TARGET_THROUGHPUT_RATIO,
            "cpu_ok": None if cpu_ratio is None else cpu_ratio <= TARGET_CPU_RATIO,
            "throughput_ok": None if tput_ratio is None else tput_ratio >= TARGET_THROUGHPUT_RATIO,
        },
        "server": stats,
    }


def print_table(report: dict[str, Any]) -> None:
    s = report["settings"]
    print(
        f"sequential: {s['n']} msgs x {s['repeats']} runs (median), "
        f"{s['seq_latency_ms']:g} ms latency | concurrent: {s['messages']} msgs, "
        f"{s['concurrency']} in flight, {s['latency_ms']:g} ms latency | "
        f"{report['machine']['cpus']} CPUs, Python {report['machine']['python']}, "
        f"load {report['machine']['loadavg_1m']}"
    )
    print(
        f"{'contender':<10} {'CPU ms/msg':>11} {'(runs)':>20} {'wall ms/msg':>12} "
        f"{'msgs/s':>9} {'(runs)':>20} {'CPU ms/msg@conc':>16}"
    )
    for name, f in report["results"].items():
        runs = ", ".join(f"{r:.2f}" for r in f["cpu_runs"] or [])
        rates = ", ".join(f"{r:.0f}" for r in f["rate_runs"] or [])
        print(
            f"{name:<11} {f['cpu_ms_per_msg']:>10.3f} {runs:>20} "
            f"{f['seq_wall_ms_per_msg']:>12.3f} {f['msgs_per_s']:>9.1f} {rates:>20} "
            f"{f['conc_cpu_ms_per_msg']:>16.3f}"
        )
    r, t = report["ratios"], report["targets"]

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("ok" if ok else "MISSED")

    print(
        f"chatfn/raw CPU        {r['cpu'] if r['cpu'] is not None else '-':>6}  "
        f"(target <= {t['cpu_max']}: {verdict(t['cpu_ok'])}; best runs: "
        f"{r['cpu_best_runs'] if r['cpu_best_runs'] is not None else '-'})"
    )
    print(
        f"chatfn/raw throughput {r['throughput'] if r['throughput'] is not None else '-':>6}"
        f"  (target >= {t['throughput_min']}: {verdict(t['throughput_ok'])})"
    )
    if r.get("cpu_vs_raw_aiohttp") is not None:
        print(f"chatfn/raw_aiohttp CPU {r['cpu_vs_raw_aiohttp']:>5}  (the raw loop on aiohttp too)")
    if report["pipeline_overhead_ms"] is not None:
        print(
            f"chatfn/raw_post CPU   {r['cpu_vs_raw_post']:>6}  (chatfn's own pipeline: "
            f"{report['pipeline_overhead_ms']:+.3f} ms/msg over the same HTTP path)"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="chatfn pipeline vs raw openai SDK benchmark")
    p.add_argument("-n", "--n", type=int, default=300, help="sequential messages per run")
    p.add_argument("--warmup", type=int, default=50, help="sequential warm-up messages per run")
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="sequential runs per contender (interleaved; median and min kept)",
    )
    p.add_argument("--seq-latency-ms", type=float, default=0.0)
    p.add_argument("--messages", type=int, default=1000, help="concurrent: total messages")
    p.add_argument("--concurrency", type=int, default=200, help="concurrent: in flight")
    p.add_argument("--latency-ms", type=float, default=200.0, help="concurrent: server latency")
    p.add_argument(
        "--conc-repeats", type=int, default=3, help="concurrent runs per contender (median kept)"
    )
    p.add_argument(
        "--logs",
        choices=("null", "off", "stderr"),
        default="null",
        help="chatfn logging: INFO formatted to a null sink (default), removed, or to stderr",
    )
    p.add_argument(
        "--sync-handler",
        action="store_true",
        help="chatfn's function is a plain def (run via asyncio.to_thread) instead of async def",
    )
    p.add_argument(
        "--no-limits",
        action="store_true",
        help="chatfn without `limits:` (by default every message and request is counted)",
    )
    p.add_argument(
        "--admin",
        action="store_true",
        help="sequential phase: also chatfn with the admin console on (chatfn_admin)",
    )
    p.add_argument(
        "--no-raw-post",
        action="store_true",
        help="skip the raw_post reference contender in the sequential phase",
    )
    p.add_argument(
        "--raw-aiohttp",
        action="store_true",
        help="sequential phase: also the raw loop on the SDK's aiohttp transport (raw_aiohttp)",
    )
    p.add_argument(
        "--http-transport",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="chatfn's models.<name>.http_transport (default aiohttp, as a bot's default)",
    )
    p.add_argument("--skip-sequential", action="store_true")
    p.add_argument("--skip-concurrent", action="store_true")
    p.add_argument(
        "--profile",
        choices=("raw", "chatfn", "raw_post", "raw_aiohttp"),
        help="after the benchmark, cProfile N sequential messages of a contender",
    )
    p.add_argument("--top", type=int, default=30, help="profile rows to print")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run_all(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    missed = [k for k in ("cpu_ok", "throughput_ok") if report["targets"][k] is False]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
