"""A worker's metrics for its gateways: a worker serves no port, so its /metrics cannot be
read; instead it writes a snapshot of its counters (model requests, tokens, cost, latency, tool
calls, limit refusals) and its event loop's lag into `worker_metrics` in the shared database,
one row per worker, and a gateway's admin console reads them (chatfn/runtime/console/health.py).

Written on the worker's membership beat (chatfn/runtime/cluster.py), only when a count changed or
the
last one is `REFRESH` seconds old: an idle worker writes next to nothing, and no message pays
for it (the beat runs whatever the traffic)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from loguru import logger

from chatfn.runtime.console.lag import LagMonitor
from chatfn.storage.console.sessions import put_snapshot

if TYPE_CHECKING:
    from chatfn.runtime.console.bot_view import ConsoleBot as Bot  # the Bot, as a Protocol

REFRESH = 30.0


def summary(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Totals and per-model / per-function figures of a `Metrics.snapshot()`."""
    counters = snapshot["counters"]
    models: dict[str, dict[str, Any]] = {}

    def model(name: str) -> dict[str, Any]:
        return models.setdefault(
            name,
            {"requests": 0, "errors": 0, "tokens": 0, "cost": 0.0, "latency_avg_ms": None},
        )

    for name, outcome, n in counters.get("chatfn_model_requests", []):
        m = model(name)
        m["requests"] += int(n)
        if outcome != "ok":
            m["errors"] += int(n)
    for name, kind, n in counters.get("chatfn_model_tokens", []):
        if kind in ("prompt", "completion"):
            model(name)["tokens"] += int(n)
    for name, cost in counters.get("chatfn_model_cost", []):
        model(name)["cost"] += cost
    for name, buckets, total in snapshot["histograms"].get("chatfn_model_latency_seconds", []):
        count = sum(buckets)
        if count:
            model(name)["latency_avg_ms"] = round(total / count * 1000, 1)
    tools: dict[str, dict[str, int]] = {}
    for fn, outcome, n in counters.get("chatfn_tool_calls", []):
        t = tools.setdefault(fn, {"calls": 0, "errors": 0})
        t["calls"] += int(n)
        if outcome != "ok":
            t["errors"] += int(n)
    refusals = sum(int(n) for *_, n in counters.get("chatfn_limit_refusals", []))
    return {
        "model_requests": sum(m["requests"] for m in models.values()),
        "model_errors": sum(m["errors"] for m in models.values()),
        "tokens": sum(m["tokens"] for m in models.values()),
        "cost": round(sum(m["cost"] for m in models.values()), 6),
        "tool_calls": sum(t["calls"] for t in tools.values()),
        "tool_errors": sum(t["errors"] for t in tools.values()),
        "limit_refusals": refusals,
        "messages_out": sum(int(n) for *_, n in counters.get("chatfn_messages_out", [])),
        "models": models,
        "tools": tools,
    }


class MetricSnapshots:
    def __init__(self, bot: Bot, worker: str, host: str) -> None:
        self.bot = bot
        self.worker = worker
        self.host = host
        self.lag = LagMonitor()
        self._last: dict[str, Any] | None = None
        self._written = 0.0

    def start(self) -> None:
        self.lag.start()

    async def stop(self) -> None:
        await self.lag.stop()

    async def beat(self) -> None:
        """Write the snapshot when it changed (or is `REFRESH` seconds old)."""
        snap = self.bot.metrics.snapshot()
        data = summary(snap)
        now = time.monotonic()
        if data == self._last and now - self._written < REFRESH:
            return
        raw = {"counters": snap["counters"], "labels": snap["labels"]}
        row = {**data, "event_loop_lag_ms": self.lag.now_ms(), "raw": raw}
        storage = self.bot.storage
        try:
            await storage.run(put_snapshot, storage.engine, self.worker, self.host, row)
        except Exception as exc:  # the database briefly away: the next beat writes it
            logger.warning("worker metric snapshot not written: {}", exc)
            return
        self._last, self._written = data, now


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(rows: list[tuple[str, str, Any, dict[str, Any]]], live: set[str]) -> str:
    """The workers' counters in the Prometheus text format, each series with a `worker` label
    (families `chatfn_worker_*`, beside the gateway's own), plus `chatfn_worker_up`: what a
    gateway's /metrics adds so the workers can be scraped through it."""
    families: dict[str, list[str]] = {}
    up = []
    for worker, _host, _taken, data in rows:
        up.append(f'chatfn_worker_up{{worker="{_escape(worker)}"}} {int(worker in live)}')
        raw = data.get("raw") or {}
        for name, series in (raw.get("counters") or {}).items():
            names = (raw.get("labels") or {}).get(name, [])
            out = f"chatfn_worker_{name.removeprefix('chatfn_')}"
            lines = families.setdefault(out, [])
            for *values, value in series:
                pairs = [("worker", worker), *zip(names, values, strict=False)]
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
                lines.append(f"{out}_total{{{labels}}} {float(value)!r}")
    text = []
    if up:
        text += [
            "# HELP chatfn_worker_up Whether the worker beat lately.",
            "# TYPE chatfn_worker_up gauge",
            *up,
        ]
    for out, lines in sorted(families.items()):
        text += [
            f"# HELP {out} A worker's count, from its snapshot.",
            f"# TYPE {out} counter",
            *lines,
        ]
    return "\n".join(text) + "\n" if text else ""
