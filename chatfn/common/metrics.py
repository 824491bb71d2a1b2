"""The bot's Prometheus metrics, served by the HTTP channel at `GET /metrics`.

One set of metrics per bot (not prometheus_client's global registry), so several bots in one
process (the test suite) never share or collide on counters. Every layer counts through this
object: channels and the runtime count messages, the core counts model requests, tool calls and
limit refusals.

The counts are plain numbers kept here; prometheus_client (about 1 MB of a bot's memory, with
its WSGI and multiprocess modules) is imported only when `/metrics` is first scraped, and
renders them through a custom collector in its own text format. A bot nobody scrapes never
loads it (bench/README.md, "Memory and start-up").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Counter", "Metrics"]


class _Child:
    """One labelled series of a counter (`counter.labels(...).inc(n)`)."""

    __slots__ = ("_family", "_key")

    def __init__(self, family: _Counter, key: tuple[str, ...]) -> None:
        self._family, self._key = family, key

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        values = self._family.values
        with self._family.lock:
            values[self._key] = values.get(self._key, 0.0) + amount


UNKNOWN = "unknown"
KEYS_KEPT = 1024
Known = Callable[[str], bool]


class _Family:
    """What counters and histograms share: label names, and which of them are bounded (a value
    the label's `known` test refuses is recorded as `unknown`)."""

    def __init__(self, name: str, doc: str, labels: list[str]) -> None:
        self.name, self.doc, self.label_names = name, doc, labels
        self.known: dict[int, Known] = {}
        self.lock = threading.Lock()
        # label values -> key, for the known values seen lately (several lookups per message,
        # each the same few values); at most KEYS_KEPT, then started afresh.
        self._keys: dict[tuple[Any, ...], tuple[str, ...]] = {}

    def key(self, values: tuple[str, ...]) -> tuple[str, ...]:
        found = self._keys.get(values)
        if found is not None:
            return found
        key = self._key(values)
        if UNKNOWN not in key:  # an unknown value may be known later (a channel registered)
            if len(self._keys) >= KEYS_KEPT:
                self._keys = {}
            self._keys[values] = key
        return key

    def _key(self, values: tuple[str, ...]) -> tuple[str, ...]:
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name}: labels {self.label_names}, got {values}")
        key = tuple(str(v) for v in values)
        if not self.known:
            return key
        return tuple(
            v if (known := self.known.get(i)) is None or known(v) else UNKNOWN
            for i, v in enumerate(key)
        )


class _Counter(_Family):
    """A counter family: label values -> total."""

    def __init__(self, name: str, doc: str, labels: list[str]) -> None:
        super().__init__(name, doc, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def labels(self, *values: str) -> _Child:
        return _Child(self, self.key(values))


Counter = _Counter


class _Observer:
    __slots__ = ("_family", "_key")

    def __init__(self, family: _Histogram, key: tuple[str, ...]) -> None:
        self._family, self._key = family, key

    def observe(self, value: float) -> None:
        family = self._family
        with family.lock:
            series = family.series.get(self._key)
            if series is None:
                series = family.series[self._key] = [[0] * len(family.bounds), 0.0]
            counts = series[0]
            for i, bound in enumerate(family.bounds):  # non-cumulative; summed on render
                if value <= bound:
                    counts[i] += 1
                    break
            series[1] += value


class _Histogram(_Family):
    """A histogram family: label values -> (count per bucket, sum)."""

    def __init__(self, name: str, doc: str, labels: list[str], buckets: tuple[float, ...]):
        super().__init__(name, doc, labels)
        self.bounds = (*sorted(float(b) for b in buckets), math.inf)
        self.series: dict[tuple[str, ...], list[Any]] = {}

    def labels(self, *values: str) -> _Observer:
        return _Observer(self, self.key(values))


class Metrics:
    def __init__(self) -> None:
        self.messages_in = _Counter(
            "chatfn_messages_in", "Messages received, per channel.", ["channel"]
        )
        self.messages_out = _Counter(
            "chatfn_messages_out", "Messages sent, per channel.", ["channel"]
        )
        self.model_requests = _Counter(
            "chatfn_model_requests", "Model requests, per model and outcome.", ["model", "outcome"]
        )
        self.model_tokens = _Counter(
            "chatfn_model_tokens",
            "Tokens the provider reported, per model and kind (prompt, completion, cached, "
            "reasoning).",
            ["model", "kind"],
        )
        self.model_latency = _Histogram(
            "chatfn_model_latency_seconds",
            "Model request latency, per model.",
            ["model"],
            buckets=(0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128),
        )
        self.tool_calls = _Counter(
            "chatfn_tool_calls",
            "Function calls, per function and outcome.",
            ["function", "outcome"],
        )
        self.limit_refusals = _Counter(
            "chatfn_limit_refusals", "Messages refused by a limit, per limit.", ["limit"]
        )
        self.model_fallbacks = _Counter(
            "chatfn_model_fallbacks",
            "Requests a model failed and handed to the next model of its fallback chain.",
            ["model", "to"],
        )
        self.model_cost = _Counter(
            "chatfn_model_cost",
            "Cost of model requests (models.<name>.price, currency units), per model.",
            ["model"],
        )
        self.limit_downgrades = _Counter(
            "chatfn_limit_downgrades",
            "Turns answered by limits.on_exceed's downgrade model, per limit reached.",
            ["limit"],
        )
        self.messages_dropped = _Counter(
            "chatfn_messages_dropped",
            "Messages a channel gave up before its platform saw them, per channel and reason "
            "(reply_limit: QQ's 5 replies to one message were used up).",
            ["channel", "reason"],
        )
        self.plugins_switched_off = _Counter(
            "chatfn_plugins_switched_off",
            "Plugins switched off, per plugin and reason (failures: its circuit breaker "
            "opened; startup: its start-up hook raised or hung).",
            ["plugin", "reason"],
        )
        self.message_fates = _Counter(
            "chatfn_message_fates",
            "Incoming messages by the fate their turn recorded (answered, function, declined, "
            "not_addressed, ignored, failed) and held messages whose sender was told they wait.",
            ["fate"],
        )
        self.approvals = _Counter(
            "chatfn_approvals",
            "Approvals of calls held for approval, by outcome: requested, approved, denied, "
            "expired, refused (a stale answer: expired, answered, another chat's, not allowed).",
            ["outcome"],
        )
        self._counters = [
            self.messages_in,
            self.message_fates,
            self.approvals,
            self.messages_out,
            self.messages_dropped,
            self.model_requests,
            self.model_tokens,
            self.tool_calls,
            self.limit_refusals,
            self.model_fallbacks,
            self.model_cost,
            self.limit_downgrades,
            self.plugins_switched_off,
        ]
        self._outbox_depth: Callable[[], float] | None = None
        self._registry: Any = None
        # Labels whose values are fixed by the code, not by input: bounded here once.
        self.bound("kind", {"prompt", "completion", "cached", "reasoning"}.__contains__)
        fates = {"answered", "function", "declined", "not_addressed", "ignored", "held"}
        self.bound("fate", (fates | {"failed", "expired"}).__contains__)
        self.bound(
            "limit",
            {
                f"{scope}.{metric}"
                for scope in ("per_user", "per_chat")
                for metric in (
                    "messages_per_minute",
                    "model_calls_per_day",
                    "tokens_per_day",
                    "cost_per_day",
                )
            }.__contains__,
        )

    def bound(self, label: str, known: Known) -> None:
        """Every series' `label` takes only values `known` accepts; any other is counted under
        `unknown`. Why: a label value is a series kept for the process's life, and input
        chooses some of them (a function name a model was talked into calling, or an MCP
        client sent): unbounded, 20 made-up names would be 20 series, a million a leak."""
        for family in (*self._counters, self.model_latency):
            if label in family.label_names:
                family.known[family.label_names.index(label)] = known

    def declare(self, name: str, doc: str, labels: list[str]) -> Counter:
        """A plugin's counter (`Plugin(metrics=[Metric(...)])`), made once per bot and counted
        like the core's: in /metrics and a worker's snapshots. Declared again with other
        labels, or a name the core uses with other labels: an error naming it."""
        for counter in self._counters:
            if counter.name == name:
                if counter.label_names != labels:
                    raise ValueError(
                        f"metric {name}: declared with labels {labels}, has {counter.label_names}"
                    )
                return counter
        if not name.startswith("chatfn_"):
            raise ValueError(f"metric {name}: a plugin's metric is named chatfn_<plugin>_...")
        counter = _Counter(name, doc, labels)
        self._counters.append(counter)
        return counter

    def declared(self, name: str) -> Counter:
        """The counter `name` (a KeyError: no plugin declared it)."""
        for counter in self._counters:
            if counter.name == name:
                return counter
        raise KeyError(f"no metric {name} is declared (Plugin(metrics=[Metric(...)]))")

    def watch_outbox(self, depth: Callable[[], float]) -> None:
        """Report `depth()` as chatfn_outbox_depth at each scrape (when an outbox exists)."""
        self._outbox_depth = depth

    def snapshot(self) -> dict[str, Any]:
        """Every counter's and the latency histogram's values as plain data (JSON): what a
        worker writes for its gateway's console (chatfn/runtime/metric_snapshots.py), since a worker
        serves no /metrics of its own."""
        counters: dict[str, list[list[Any]]] = {}
        labels: dict[str, list[str]] = {}
        for counter in self._counters:
            with counter.lock:
                counters[counter.name] = [[*k, v] for k, v in counter.values.items()]
            labels[counter.name] = list(counter.label_names)
        latency = self.model_latency
        with latency.lock:
            series = [[*k, list(s[0]), s[1]] for k, s in latency.series.items()]
        return {"counters": counters, "labels": labels, "histograms": {latency.name: series}}

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text format of every metric, and its content type."""
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        if self._registry is None:
            registry = CollectorRegistry(auto_describe=True)
            registry.register(_Collector(self))
            self._registry = registry
        return generate_latest(self._registry), CONTENT_TYPE_LATEST

    def families(self) -> Iterator[Any]:
        """prometheus_client metric families of the current values (imported by `render`)."""
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        for counter in self._counters:
            family = CounterMetricFamily(counter.name, counter.doc, labels=counter.label_names)
            with counter.lock:
                items = list(counter.values.items())
            for key, value in items:
                family.add_metric(list(key), value)
            yield family
        h = self.model_latency
        hist = HistogramMetricFamily(h.name, h.doc, labels=h.label_names)
        with h.lock:
            series = [(key, list(counts), total) for key, (counts, total) in h.series.items()]
        for key, counts, total in series:
            cumulative, running = [], 0
            for bound, n in zip(h.bounds, counts, strict=True):
                running += n
                cumulative.append((_bound_text(bound), running))
            hist.add_metric(list(key), cumulative, total)
        yield hist
        gauge = GaugeMetricFamily("chatfn_outbox_depth", "Messages waiting to be delivered.")
        gauge.add_metric([], self._outbox_depth() if self._outbox_depth is not None else 0.0)
        yield gauge


def _bound_text(bound: float) -> str:
    """Bucket bounds as prometheus_client writes them (`0.25`, `1.0`, `+Inf`)."""
    return "+Inf" if bound == math.inf else repr(float(bound))


class _Collector:
    """Hands the bot's counts to prometheus_client at each scrape."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Any]:
        return self._metrics.families()
