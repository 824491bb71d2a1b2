"""Metric label values are bounded to names the bot knows (chatfn/runtime/bot.py,
chatfn/common/metrics.py):
what a model or an MCP client makes up is counted, under `unknown`, and adds no series."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from chatfn.common.metrics import Metrics
from chatfn.testing import ScriptedModel, TestBot, say
from providers.scripted import calls


def series(body: bytes, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name
    }


async def test_twenty_made_up_function_names_make_one_unknown_series(tmp_path: Path) -> None:
    made_up = [f"steal_{i}_{'x' * i}" for i in range(20)]
    model = ScriptedModel(
        [calls(*((n, {}) for n in made_up[:10])), say("none of those exist")], name="alpha"
    )
    tb = TestBot(tmp_path, model=model)
    try:
        await tb.send("call them all")  # 10 from the model
        caller = tb.bot.exposure.caller()
        for name in made_up[10:]:  # 10 from an MCP client
            await tb.bot.exposure.call_function(caller, name, {})
        await tb.send("/help")  # a real function keeps its own series
        body, _ = tb.bot.metrics.render()
    finally:
        await tb.aclose()
    tools = series(body, "chatfn_tool_calls_total")
    assert tools == {
        (("function", "unknown"), ("outcome", "unknown")): 20,
        (("function", "help"), ("outcome", "ok")): 1,
    }
    assert series(body, "chatfn_model_requests_total") == {
        (("model", "alpha"), ("outcome", "ok")): 2
    }
    assert series(body, "chatfn_messages_in_total") == {(("channel", "test"),): 2}


def test_every_label_input_can_choose_is_bounded() -> None:
    m = Metrics()
    m.bound("function", {"help"}.__contains__)
    m.bound("model", {"alpha"}.__contains__)
    m.bound("channel", {"http"}.__contains__)
    for i in range(20):
        m.tool_calls.labels(f"f{i}", "ok").inc()
        m.model_requests.labels(f"m{i}", "ok").inc()
        m.model_latency.labels(f"m{i}").observe(0.1)
        m.model_tokens.labels(f"m{i}", f"k{i}").inc(3)
        m.messages_in.labels(f"p{i}").inc()
        m.messages_out.labels(f"p{i}").inc()
        m.limit_refusals.labels(f"l{i}").inc()
    m.model_requests.labels("alpha", "ok").inc()
    body, _ = m.render()
    assert series(body, "chatfn_tool_calls_total") == {
        (("function", "unknown"), ("outcome", "ok")): 20
    }
    assert series(body, "chatfn_model_requests_total") == {
        (("model", "unknown"), ("outcome", "ok")): 20,
        (("model", "alpha"), ("outcome", "ok")): 1,
    }
    assert series(body, "chatfn_model_tokens_total") == {
        (("kind", "unknown"), ("model", "unknown")): 60
    }
    assert series(body, "chatfn_model_latency_seconds_count") == {(("model", "unknown"),): 20}
    assert series(body, "chatfn_messages_in_total") == {(("channel", "unknown"),): 20}
    assert series(body, "chatfn_messages_out_total") == {(("channel", "unknown"),): 20}
    assert series(body, "chatfn_limit_refusals_total") == {(("limit", "unknown"),): 20}
