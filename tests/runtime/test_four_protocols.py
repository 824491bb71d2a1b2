"""One conversation through the whole bot (router, tool loop, executor, storage) on the real
SDKs of all four protocols, whole and streamed, against a local server scripting the model:

1. the model thinks, says a word, and calls two functions at once: `weather` (fine) and
   `reminder_set` with a time it wrote as "tomorrow morning" (a validation error);
2. it gets both results back, the error flagged as one, and corrects the call;
3. it answers.

Checked on the wire: the results in each protocol's own shape, the ids that tie them to the
calls, and the reasoning (DeepSeek reasoning_content, Anthropic signed thinking blocks, Gemini
thought parts and signatures) carried back on every following request of the turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatfn.testing import TestBot
from providers.factory import build_model
from providers.types import StreamEvent
from tests.fakes.protocols import (
    PROTOCOLS,
    Protocol,
    Turn,
    model_config,
    replies,
    signature,
    tool_results,
)
from tests.fakes.raw_replay import RawReplayServer
from tests.runtime.functions import make_registry

BAD = {"when": "tomorrow morning", "text": "umbrella"}
GOOD = {"when": "2030-01-01T08:00:00", "text": "umbrella"}
FINAL = "Oslo is sunny, and I will remind you about the umbrella on 1 January 2030 at 08:00."
THOUGHTS = [
    "Weather and a reminder: both at once.",
    "The time was not ISO; fix it.",
    "All set; answer.",
]
TURNS = [
    Turn(
        thinking=THOUGHTS[0],
        text="Let me check.",
        calls=[("weather", {"city": "Oslo"}), ("reminder_set", BAD)],
    ),
    Turn(thinking=THOUGHTS[1], calls=[("reminder_set", GOOD)]),
    Turn(thinking=THOUGHTS[2], text=FINAL),
]
QUESTION = "Weather in Oslo? And remind me about the umbrella tomorrow morning."


async def _converse(
    tmp_path: Path, server: RawReplayServer, protocol: Protocol, stream: bool, *, show: bool = False
) -> tuple[TestBot, list[str], list[str], list[StreamEvent]]:
    server.queue = list(replies(protocol, TURNS, stream=stream))
    thinking: dict[str, Any] = {"enabled": True, "budget_tokens": 1024, "show": show}
    model = build_model(
        "default", model_config(protocol, server.url, stream=stream, thinking=thinking)
    )
    ran: list[str] = []
    tb = TestBot(tmp_path, model=model, registry=make_registry(ran), builtins=False)
    events: list[StreamEvent] = []

    async def observe(event: StreamEvent) -> None:
        events.append(event)

    answer = await tb.send(QUESTION, on_stream=observe)
    return tb, answer, ran, events


def _assistant_turns(protocol: Protocol, body: dict[str, Any]) -> list[Any]:
    if protocol == "gemini":
        return [c["parts"] for c in body["contents"] if c["role"] == "model"]
    return [m for m in body["messages"] if m["role"] == "assistant"]


def _check_thinking_replayed(protocol: Protocol, body: dict[str, Any], rounds: int) -> None:
    """Every assistant turn of this tool loop comes back with the reasoning it had."""
    turns = _assistant_turns(protocol, body)
    assert len(turns) == rounds
    for k, turn in enumerate(turns, 1):
        if protocol == "openai":
            assert "reasoning_content" not in turn
        elif protocol == "deepseek":
            assert turn["reasoning_content"] == THOUGHTS[k - 1]
        elif protocol == "anthropic":
            assert turn["content"][0] == {
                "type": "thinking",
                "thinking": THOUGHTS[k - 1],
                "signature": signature(k),
            }
        else:
            assert turn[0] == {"text": THOUGHTS[k - 1], "thought": True}
            first_call = next(p for p in turn if "functionCall" in p)
            assert first_call["thoughtSignature"] == signature(k)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_parallel_calls_validation_error_retry_answer(
    tmp_path: Path, server: RawReplayServer, protocol: Protocol, stream: bool
) -> None:
    tb, answer, ran, events = await _converse(tmp_path, server, protocol, stream)
    assert answer == [FINAL]
    assert ran == ["weather Oslo", "reminder 2030-01-01 08:00 umbrella"]
    first, retry, last = server.bodies()

    # The thinking switch reached each API in its own words.
    if protocol == "deepseek":
        assert first["thinking"] == {"type": "enabled"}
    elif protocol == "anthropic":
        assert first["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    elif protocol == "gemini":
        # google-genai passes thinkingConfig's fields through in snake_case; the API's
        # proto JSON parser accepts both spellings.
        config = first["generationConfig"]["thinkingConfig"]
        assert config.get("includeThoughts", config.get("include_thoughts")) is True
    else:
        assert "thinking" not in first and "reasoning_effort" not in first  # gpt-4o

    # The retry request: both results of the parallel round, the error flagged as one.
    ok, error = tool_results(protocol, retry)
    assert ok.content == "Oslo: 21°C, sunny"
    assert error.content.startswith("Invalid arguments for reminder_set") and "when" in (
        error.content
    )
    if protocol in ("openai", "deepseek"):
        # Chat Completions has no error flag: the message itself says what to fix.
        assert (ok.is_error, error.is_error) == (None, None)
        assert [ok.call_id, error.call_id] == ["call_1_0", "call_1_1"]
        assert [c["id"] for c in retry["messages"][-3]["tool_calls"]] == ["call_1_0", "call_1_1"]
    elif protocol == "anthropic":
        assert (ok.is_error, error.is_error) == (False, True)
        assert [ok.call_id, error.call_id] == ["toolu_1_0", "toolu_1_1"]
        assert len(retry["messages"][-1]["content"]) == 2  # one user turn holds both results
    else:
        assert (ok.is_error, error.is_error) == (False, True)  # `error` vs `result` response
        assert [ok.name, error.name] == ["weather", "reminder_set"]
        calls = [p["functionCall"] for p in retry["contents"][-2]["parts"] if "functionCall" in p]
        assert [c["id"] for c in calls] == [ok.call_id, error.call_id]
        assert ok.call_id.startswith("call_") and ok.call_id != error.call_id
    _check_thinking_replayed(protocol, retry, rounds=1)

    [fixed] = tool_results(protocol, last)
    assert fixed.content == "reminder set for 2030-01-01 08:00" and not fixed.is_error
    _check_thinking_replayed(protocol, last, rounds=2)

    # Thinking is stored with the reply, not sent; history shows the question and the answer.
    storage = tb.bot.storage
    user, reply = storage.recent_messages("test", "private:alice", 10)
    assert (user.text, reply.text) == (QUESTION, FINAL)
    stored = storage.thinking_of(reply.id)
    assert stored == (None if protocol == "openai" else "\n\n".join(THOUGHTS))

    if not stream:
        assert events == []  # streaming off in config: the observer is never called
    else:
        kinds = [e.type for e in events]
        assert "thinking" not in kinds  # thinking.show is off
        assert "".join(e.text for e in events if e.type == "text") == "Let me check." + FINAL
        starts = [e.tool_call.name for e in events if e.type == "tool_call_start"]
        ends = [e.tool_call for e in events if e.type == "tool_call_end"]
        assert starts == ["weather", "reminder_set", "reminder_set"]
        assert [c.name for c in ends] == starts
        assert ends[1].arguments and "tomorrow morning" in ends[1].arguments
        assert kinds.index("tool_call_end") > kinds.index("tool_call_start")
        assert kinds[-1] == "text"  # the answer streamed last
    await tb.aclose()


@pytest.mark.parametrize("protocol", ["deepseek", "anthropic", "gemini"])
async def test_thinking_show_streams_reasoning_to_the_channel(
    tmp_path: Path, server: RawReplayServer, protocol: Protocol
) -> None:
    tb, answer, _ran, events = await _converse(tmp_path, server, protocol, True, show=True)
    assert answer == [FINAL]
    assert "".join(e.text for e in events if e.type == "thinking") == "".join(THOUGHTS)
    await tb.aclose()
