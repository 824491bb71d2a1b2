"""The bot's Prometheus metrics, served by the HTTP channel at `GET /metrics`.

One registry per bot (not prometheus_client's global one), so several bots in one process (the
test suite) never share or collide on counters. Every layer counts through this object: channels
and the runtime count messages, the core counts model requests, tool calls and limit refusals.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_in = Counter(
            "chatfn_messages_in", "Messages received, per channel.", ["channel"], registry=r
        )
        self.messages_out = Counter(
            "chatfn_messages_out", "Messages sent, per channel.", ["channel"], registry=r
        )
        self.model_requests = Counter(
            "chatfn_model_requests",
            "Model requests, per model and outcome.",
            ["model", "outcome"],
            registry=r,
        )
        self.model_tokens = Counter(
            "chatfn_model_tokens",
            "Tokens the provider reported, per model and kind (prompt, completion, cached, "
            "reasoning).",
            ["model", "kind"],
            registry=r,
        )
        self.model_latency = Histogram(
            "chatfn_model_latency_seconds",
            "Model request latency, per model.",
            ["model"],
            buckets=(0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128),
            registry=r,
        )
        self.tool_calls = Counter(
            "chatfn_tool_calls",
            "Function calls, per function and outcome.",
            ["function", "outcome"],
            registry=r,
        )
        self.limit_refusals = Counter(
            "chatfn_limit_refusals",
            "Messages refused by a limit, per limit.",
            ["limit"],
            registry=r,
        )
        self._outbox = Gauge("chatfn_outbox_depth", "Messages waiting to be delivered.", registry=r)

    def watch_outbox(self, depth: Callable[[], float]) -> None:
        """Report `depth()` as chatfn_outbox_depth at each scrape (when an outbox exists)."""
        self._outbox.set_function(depth)

    def render(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
