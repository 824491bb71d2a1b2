"""One contender of bench_pipeline.py's peak-RSS comparison (`--rss`), in a process of its own.

    python bench/peak_rss_child.py CONTENDER URL MESSAGES CONCURRENCY SETUP_JSON

CONTENDER is `raw` (bench/raw_loop.py: imports only `openai`), `chatfn` (bench_pipeline's
`Bot.handle()` contender: SQLite file, limits, INFO logs to a null sink) or `pydantic_ai` (an
agent with one tool, `get_weather`, on pydantic-ai's OpenAI provider with `base_url`; run by the
interpreter that has bench/requirements-compare.txt, which need not have chatfn). Each sends
MESSAGES messages, CONCURRENCY in flight, every message in its own conversation (a tool call, the
function, the final answer), checks every answer, and prints one JSON line: peak RSS (`VmHWM`
of /proc/self/status: the whole life of this program, imports included), messages/s and CPU ms
per message over the run.

Why VmHWM and not `getrusage(RUSAGE_SELF).ru_maxrss`: Linux keeps ru_maxrss across execve, and
the child starts as a copy of the parent (subprocess forks or vforks before exec), so ru_maxrss
reports at least the parent's RSS: 84.6 MB for every contender here, bench_pipeline's own size.
VmHWM belongs to the address space, which exec replaces. Both are printed.

Why processes: peak RSS is per process, so each contender must be alone in one; and only the
standard library is imported here before the contender's own imports.
SETUP_JSON carries what bench_pipeline derives from chatfn (the raw loop's tool definition and
system prompt) and the expected final text, so this file needs nothing from the repository
at the top.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Runner = Callable[[int], Awaitable[str]]


async def _pydantic_ai(url: str, setup: dict[str, Any]) -> tuple[Runner, Any]:
    """pydantic-ai's agent doing the same work: one tool, the same system prompt and question."""
    from pydantic_ai import Agent  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.models.openai import OpenAIChatModel  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.providers.openai import OpenAIProvider  # type: ignore[import-not-found, unused-ignore]

    provider = OpenAIProvider(base_url=url, api_key="bench")
    agent = Agent(OpenAIChatModel(setup["model"], provider=provider), system_prompt=setup["system"])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: City name, e.g. Paris
        """
        return json.dumps({"city": city, "temp_c": 18, "sky": "sunny"})

    async def run(_i: int) -> str:
        result = await agent.run(setup["question"])
        return str(result.output)

    async def close() -> None:
        await provider.client.close()

    return run, close


async def _raw(url: str, setup: dict[str, Any]) -> tuple[Runner, Any]:
    from bench.raw_loop import RawContender

    raw = RawContender(url, setup["tools"], setup["system"])
    return raw.message, raw.aclose


async def _chatfn(url: str, setup: dict[str, Any]) -> tuple[Runner, Any]:
    from bench.bench_pipeline import ChatfnContender

    # The parent's folder: a database it had migrated in an earlier process (a restart, as a
    # bot serves), unless --rss-fresh-db (a first start: since 346cdbc the Bot migrates in a
    # child process of its own, chatfn/storage/schema_child.py; before, Alembic ran here).
    folder = setup.get("db_dir") or tempfile.mkdtemp(prefix="bench-rss-")
    chatfn = ChatfnContender(url, Path(folder))
    return chatfn.message, chatfn.aclose


def _vm_hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


CONTENDERS = {"raw": _raw, "chatfn": _chatfn, "pydantic_ai": _pydantic_ai}


async def main(name: str, url: str, messages: int, concurrency: int, setup: dict[str, Any]) -> None:
    run, close = await CONTENDERS[name](url, setup)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            answer = await run(i)
        if answer != setup["final_text"]:
            raise RuntimeError(f"{name} answered {answer!r}")

    c0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(messages)))
    c1, w1 = time.process_time(), time.perf_counter()
    await close()
    maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(
        json.dumps(
            {
                "contender": name,
                "peak_rss_mb": round(_vm_hwm_kb() / 1024, 1),
                "ru_maxrss_mb": round(maxrss_kb / 1024, 1),
                "msgs_per_s": round(messages / (w1 - w0), 1) if messages else 0.0,
                "cpu_ms_per_msg": round((c1 - c0) * 1000 / max(messages, 1), 3),
                "python": sys.executable,
                # Modules of Alembic loaded here (a first start migrating in this process).
                "alembic_modules": sum(1 for m in sys.modules if m.split(".")[0] == "alembic"),
            }
        )
    )


if __name__ == "__main__":
    name, url, messages, concurrency, setup = sys.argv[1:6]
    asyncio.run(main(name, url, int(messages), int(concurrency), json.loads(setup)))
