"""Fallback chains (`models.NAME.fallback`, `cooldown`) through the whole bot, on the real
openai and anthropic SDKs against two local servers scripting the models:

- an outage of the first model in the middle of a tool loop, the same turn finished by the
  second model on the other protocol (the conversation, its calls and results converted: on
  Anthropic tool_use ids, tool_result blocks and alternation; on OpenAI tool messages);
- the cooldown: a model that failed is skipped, then tried again once it is over (the bot's
  clock is injected, nothing sleeps);
- an error another model cannot fix (a bad request) does not fail over.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from loguru import logger

from chatfn.testing import TestBot
from providers.types import StreamEvent
from tests.fakes.protocols import Protocol, Turn, replies, tool_results
from tests.fakes.raw_replay import RawReplayServer
from tests.runtime.functions import make_registry

BAD = {"when": "tomorrow morning", "text": "umbrella"}
GOOD = {"when": "2030-01-01T08:00:00", "text": "umbrella"}
FINAL = "Oslo is sunny, and the umbrella reminder is set for 1 January 2030 at 08:00."
QUESTION = "Weather in Oslo? And remind me about the umbrella tomorrow morning."
START = 1_800_000_000.0


@pytest.fixture
async def backup_server() -> Any:
    async with RawReplayServer() as srv:
        yield srv


def _entry(protocol: Protocol, url: str, stream: bool, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "api_key": "test-key",
        "max_retries": 0,
        "timeout": 10,
        "streaming": stream,
        **extra,
    }
    if protocol == "openai":
        return {"provider": "openai", "model": "gpt-4o", "base_url": f"{url}/v1", **entry}
    return {
        "provider": "anthropic",
        "model": "claude-test",
        "base_url": url,
        "thinking": {"enabled": True, "budget_tokens": 1024},
        **entry,
    }


def _config(first: Protocol, second: Protocol, a: str, b: str, stream: bool) -> dict[str, Any]:
    return {
        "models": {
            "main": _entry(first, a, stream, fallback=["backup"], cooldown=60),
            "backup": _entry(second, b, stream),
        },
        "bot": {"model": "main"},
    }


def outage(status: int = 503) -> Any:
    message = {"error": {"type": "overloaded_error", "message": "the service is down"}}
    return lambda _r: web.json_response(message, status=status)


class Clock:
    """The bot's clock (epoch seconds): the cooldown reads it; a test moves it."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _debug_lines() -> tuple[list[str], int]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", format="{message}")
    return lines, sink


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("first", "second"), [("openai", "anthropic"), ("anthropic", "openai")], ids=["oa-an", "an-oa"]
)
async def test_outage_mid_tool_loop_is_finished_by_the_next_model_on_its_protocol(
    tmp_path: Path,
    server: RawReplayServer,
    backup_server: RawReplayServer,
    first: Protocol,
    second: Protocol,
    stream: bool,
) -> None:
    # Round 1 on the first model: two calls at once, one with arguments it gets wrong.
    round_1 = Turn(
        thinking="Weather and a reminder: both at once.",  # Anthropic only: signed thinking
        text="Let me check.",
        calls=[("weather", {"city": "Oslo"}), ("reminder_set", BAD)],
    )
    server.queue = [
        *replies(first, [round_1], stream=stream),
        outage(),  # round 2: the provider is down (after the SDK's retries: max_retries 0)
    ]
    # The second model takes round 2 on: it fixes the call, then answers.
    backup_server.queue = list(
        replies(second, [Turn(calls=[("reminder_set", GOOD)]), Turn(text=FINAL)], stream=stream)
    )
    ran: list[str] = []
    tb = TestBot(
        tmp_path,
        config=_config(first, second, server.url, backup_server.url, stream),
        registry=make_registry(ran),
        builtins=False,
        clock=Clock(),
    )
    events: list[StreamEvent] = []

    async def observe(event: StreamEvent) -> None:
        events.append(event)

    lines, sink = _debug_lines()
    try:
        answer = await tb.send(QUESTION, on_stream=observe if stream else None)
    finally:
        logger.remove(sink)
    assert answer == [FINAL]
    assert ran == ["weather Oslo", "reminder 2030-01-01 08:00 umbrella"]
    assert len(server.received) == 2 and len(backup_server.received) == 2
    if stream:
        assert "".join(e.text or "" for e in events if e.type == "text").endswith(FINAL)

    # The second model's first request: the first model's round, in the second's protocol.
    taken, last = backup_server.bodies()
    first_ids = ["call_1_0", "call_1_1"] if first == "openai" else ["toolu_1_0", "toolu_1_1"]
    ok, error = tool_results(second, taken)
    assert [ok.call_id, error.call_id] == first_ids
    assert ok.content == "Oslo: 21°C, sunny"
    assert error.content.startswith("Invalid arguments for reminder_set")
    if second == "anthropic":
        roles = [m["role"] for m in taken["messages"]]
        assert roles == ["user", "assistant", "user"]  # alternating, results in one user turn
        assistant = taken["messages"][1]["content"]
        assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
        assert [b["id"] for b in assistant if b["type"] == "tool_use"] == first_ids
        assert (ok.is_error, error.is_error) == (False, True)
        # A tool round another model made carries no signed thinking: thinking stays off
        # until the round is over, as the API wants one thinking setting per tool loop.
        assert "thinking" not in taken
        assert "system" in taken and "tools" in taken
    else:
        assistant = next(m for m in taken["messages"] if m["role"] == "assistant")
        assert [c["id"] for c in assistant["tool_calls"]] == first_ids
        assert "reasoning_content" not in assistant  # Anthropic's signed thinking stays there
        assert taken["messages"][0]["role"] == "system"
    [fixed] = tool_results(second, last)
    assert fixed.content == "reminder set for 2030-01-01 08:00"

    # On record: every attempt against the model that made it.
    rows = tb.bot.storage.chat_state.usage_rows()
    assert [(r.model_name, r.outcome) for r in rows] == [
        ("main", "ok"),
        ("main", "ProviderUnavailable"),
        ("backup", "ok"),
        ("backup", "ok"),
    ]
    metrics = tb.bot.metrics
    assert metrics.model_requests.values[("backup", "ok")] == 2
    assert metrics.model_fallbacks.values[("main", "backup")] == 1
    assert any(
        "model main failed (ProviderUnavailable" in line and "backup" in line for line in lines
    )
    # What /stats reads: requests per model that made them.
    since = datetime.fromtimestamp(0, UTC)
    stats = tb.bot.storage.chat_state.stats("test", "private:alice", since)
    assert [(name, calls) for name, calls, _, _ in stats.models or []] == [
        ("backup", 2),
        ("main", 2),
    ]
    await tb.aclose()


async def test_a_failed_model_rests_for_its_cooldown_then_is_tried_again(
    tmp_path: Path, server: RawReplayServer, backup_server: RawReplayServer
) -> None:
    clock = Clock()
    tb = TestBot(
        tmp_path,
        config=_config("openai", "anthropic", server.url, backup_server.url, False),
        registry=make_registry([]),
        builtins=False,
        clock=clock,
    )
    server.queue = [outage(502)]
    backup_server.queue = list(
        replies("anthropic", [Turn(text="one"), Turn(text="two")], stream=False)
    )
    assert await tb.send("first") == ["one"]
    assert len(server.received) == 1
    clock.now += 59  # within main's cooldown: skipped, the backup answers at once
    assert await tb.send("second") == ["two"]
    assert len(server.received) == 1 and len(backup_server.received) == 2
    clock.now += 2  # 61 s after the failure: main is tried again, and answers
    server.queue = list(replies("openai", [Turn(text="three")], stream=False))
    assert await tb.send("third") == ["three"]
    assert len(server.received) == 2 and len(backup_server.received) == 2
    rows = tb.bot.storage.chat_state.usage_rows()
    assert [r.model_name for r in rows] == ["main", "backup", "backup", "main"]
    await tb.aclose()


async def test_a_bad_request_of_our_own_does_not_fail_over(
    tmp_path: Path, server: RawReplayServer, backup_server: RawReplayServer
) -> None:
    tb = TestBot(
        tmp_path,
        config=_config("openai", "anthropic", server.url, backup_server.url, False),
        registry=make_registry([]),
        builtins=False,
        clock=Clock(),
    )
    bad = {"error": {"message": "Invalid 'messages[1].content'", "type": "invalid_request_error"}}
    server.queue = [lambda _r: web.json_response(bad, status=400)]
    [reply] = await tb.send("hello")
    assert "request" in reply.lower()  # the user hears the model refused the request
    assert backup_server.received == []
    # Nor does it rest the model: the next message goes to it again.
    server.queue = list(replies("openai", [Turn(text="hi")], stream=False))
    assert await tb.send("again") == ["hi"]
    assert backup_server.received == []
    await tb.aclose()
