"""Messages per second through a gateway and 1, 2, 4 workers (RabbitMQ, PostgreSQL) against a
fake model with 200 ms latency per request, the latency the broker adds per message, and the
same figures for one process without a broker. Figures: bench/README.md.

    python bench/bench_cluster.py [--messages 400] [--chats 200] [--latency-ms 200]

Each message is one tool call and one answer (two model requests, bench/fake_openai.py). The
gateway runs the HTTP channel; the client posts every message at once (a chat's messages a few
ms apart) and waits for all answers. Added latency: messages sent one at a time to an idle
deployment, HTTP round trip minus the same for one process without a broker, p50 and p99.
Needs PostgreSQL (CHATFN_BENCH_PG, default the machine's `test` database as admin) and RabbitMQ
(CHATFN_BENCH_AMQP); each run uses a fresh database and queue prefix and removes them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fake_openai import ServerProcess  # noqa: E402
from tests.cluster.conftest import Proc, _delete_queues, free_port  # noqa: E402

PG = os.environ.get("CHATFN_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
AMQP = os.environ.get("CHATFN_BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672/")


def fresh_db() -> str:
    name = f"chatfn_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG).set(database=name).render_as_string(hide_password=False)


def drop_db(url: str) -> None:
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def config(work: Path, db: str, model_url: str, prefix: str | None) -> Path:
    data: dict[str, object] = {
        "storage": {"url": db},
        "models": {
            "default": {
                "provider": "openai",
                "base_url": model_url,
                "api_key": "bench",
                "model": "gpt-4o-mini",
                "native_tools": True,
            }
        },
        "plugins": {"paths": [str(ROOT / "bench" / "weather_plugin.py")]},
        "logging": {"level": "INFO"},
    }
    if prefix:
        data["broker"] = {"url": AMQP, "prefix": prefix, "partitions": 16}
    path = work / f"config-{prefix or 'single'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def post(session: aiohttp.ClientSession, base: str, chat: str, i: int) -> float:
    t0 = time.perf_counter()
    body = {"chat_id": chat, "sender_id": "u", "text": f"weather in Paris? {i}"}
    async with session.post(f"{base}/v1/messages", json=body) as r:
        data = await r.json()
    assert data["replies"] and "18" in data["replies"][0]["text"], data
    return time.perf_counter() - t0


async def load(base: str, messages: int, chats: int) -> float:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        t0 = time.perf_counter()

        async def one(i: int) -> None:
            await asyncio.sleep((i // chats) * 0.005)
            await post(session, base, f"c{i % chats}", i)

        await asyncio.gather(*(one(i) for i in range(messages)))
        return messages / (time.perf_counter() - t0)


async def latencies(base: str, n: int) -> list[float]:
    async with aiohttp.ClientSession() as session:
        return [await post(session, base, f"lat{i % 5}", i) for i in range(n)]


def run_deployment(work: Path, model_url: str, workers: int | None, args) -> dict[str, object]:
    """workers=None: one process, no broker."""
    db = fresh_db()
    prefix = f"chatfn-bench-{uuid.uuid4().hex[:8]}" if workers else None
    cfg = config(work, db, model_url, prefix)
    port = free_port()
    procs: list[Proc] = []
    try:
        for i in range(workers or 0):
            w = Proc(["--config", str(cfg), "--role", "worker"], work / f"w{workers}-{i}.log")
            procs.append(w)
        role = ["--role", "gateway"] if workers else []
        gw = Proc(
            ["--config", str(cfg), *role, "--channel", "http", "--port", str(port)],
            work / f"gw{workers}.log",
        )
        procs.append(gw)
        for p in procs:
            p.wait_for("chatfn started", 60)
        time.sleep(3 if workers and workers > 1 else 0.5)  # workers split the partitions
        base = f"http://127.0.0.1:{port}"
        lat = asyncio.run(latencies(base, args.latency_samples))
        rate = asyncio.run(load(base, args.messages, args.chats))
        return {"rate": rate, "p50": statistics.median(lat), "p99": quantile(lat, 0.99)}
    finally:
        for p in procs:
            p.stop()
        drop_db(db)
        if prefix:
            asyncio.run(_delete_queues(prefix))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--latency-samples", type=int, default=40)
    parser.add_argument("--workers", default="single,1,2,4")
    args = parser.parse_args()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"chatfn-bench-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    server = ServerProcess(latency_ms=args.latency_ms).start()
    rows = []
    try:
        for name in args.workers.split(","):
            workers = None if name == "single" else int(name)
            figures = run_deployment(work, server.url, workers, args)
            rows.append((name, figures))
            print(
                f"{name:>7}: {figures['rate']:6.1f} msg/s  round trip p50 "
                f"{figures['p50'] * 1000:6.1f} ms  p99 {figures['p99'] * 1000:6.1f} ms",
                flush=True,
            )
    finally:
        server.stop()
    single = dict(rows).get("single")
    if single:
        for name, f in rows:
            if name != "single":
                print(
                    f"broker adds ({name} worker(s), idle): p50 "
                    f"{(f['p50'] - single['p50']) * 1000:+.1f} ms, p99 "
                    f"{(f['p99'] - single['p99']) * 1000:+.1f} ms"
                )


if __name__ == "__main__":
    main()
