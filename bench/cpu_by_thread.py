"""Where the pipeline benchmark's chatfn spends its CPU: per thread (the event loop's, the
storage threads'), from the kernel's own counters (`/proc/self/task/<tid>/stat`).

The chatfn contender of bench/bench_pipeline.py (limits, usage rows and the outbox on, SQLite
file), `--n` messages one after another after a warm-up, against bench/fake_openai.py in its
own process; printed as CPU ms per message, user and system, for each thread group, and the
storage calls (`Storage.run`) a message makes.

    python bench/cpu_by_thread.py              # 3000 messages
    python bench/cpu_by_thread.py --n 1000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_pipeline import ChatfnContender  # noqa: E402
from bench.fake_openai import ServerProcess  # noqa: E402
from chatfn.storage.db import Storage  # noqa: E402


def thread_cpu() -> dict[str, list[float]]:
    """{thread group: [user s, system s]}; a group is a thread's name without its number."""
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    groups: dict[str, list[float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # ended meanwhile
            continue
        group = names.get(int(tid), f"tid {tid}").rstrip("0123456789").rstrip("_-")
        cpu = groups.setdefault(group, [0.0, 0.0])
        cpu[0] += int(fields[11]) / tick
        cpu[1] += int(fields[12]) / tick
    return groups


async def measure(n: int, warmup: int) -> dict[str, Any]:
    calls: collections.Counter[str] = collections.Counter()
    original = Storage.run

    async def counted(self: Storage, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        calls[getattr(fn, "__qualname__", repr(fn))] += 1
        return await original(self, fn, *args, **kwargs)

    with ServerProcess(latency_ms=0) as server, tempfile.TemporaryDirectory() as tmp:
        bot = ChatfnContender(server.url, Path(tmp))
        await bot.start()
        try:
            for i in range(warmup):
                await bot.message(i)
            Storage.run = counted  # type: ignore[method-assign]
            before, c0 = thread_cpu(), time.process_time()
            for i in range(warmup, warmup + n):
                await bot.message(i)
            c1, after = time.process_time(), thread_cpu()
        finally:
            Storage.run = original  # type: ignore[method-assign]
            await bot.aclose()
    threads = {}
    for group, (user, system) in after.items():
        u0, s0 = before.get(group, [0.0, 0.0])
        threads[group] = (1000 * (user - u0) / n, 1000 * (system - s0) / n)
    return {
        "process_ms": 1000 * (c1 - c0) / n,
        "threads": {g: v for g, v in threads.items() if sum(v) > 0.001},
        "storage_calls": {k: v / n for k, v in calls.most_common()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=300)
    args = ap.parse_args()
    result = asyncio.run(measure(args.n, args.warmup))
    print(f"process CPU {result['process_ms']:.3f} ms/msg ({args.n} messages)")
    for group, (user, system) in sorted(result["threads"].items()):
        print(f"  {group:12s} user {user:.3f}  sys {system:.3f}  ms/msg")
    calls = ", ".join(f"{k} {v:.2f}" for k, v in result["storage_calls"].items())
    print(f"storage calls a message: {calls}")


if __name__ == "__main__":
    main()
