"""AnthropicModel against recorded Messages API traffic, replayed to the real `anthropic` SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from providers.anthropic import AnthropicModel, to_anthropic_messages
from providers.base import collect
from providers.config import ModelConfig, ThinkingConfig
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
)
from providers.factory import build_model
from providers.types import Message, StreamEvent, ThinkingBlock, ToolCall, ToolDefinition
from tests.fakes.cassette import Interaction, load_cassette
from tests.fakes.raw_replay import RawReplayServer, cut_off_after, json_reply, sse
from tests.providers.helpers import uncached

CASSETTES = "anthropic/"


@pytest.fixture
async def server() -> AsyncIterator[RawReplayServer]:
    async with RawReplayServer() as srv:
        srv.models = []  # type: ignore[attr-defined]
        yield srv
        for model in srv.models:  # type: ignore[attr-defined]
            await model.aclose()


def make_model(server: RawReplayServer, model: str = "claude-sonnet-4-5", **extra: Any):
    cfg = ModelConfig(
        provider="anthropic", model=model, api_key="sk-test", base_url=server.url, **extra
    )
    adapter = AnthropicModel("claude", cfg)
    server.models.append(adapter)  # type: ignore[attr-defined]
    return adapter


def recorded_tools(interaction: Interaction) -> list[ToolDefinition]:
    """The function tools of a recorded request, as our definitions (server tools skipped)."""
    return [
        ToolDefinition(t["name"], t.get("description", ""), t["input_schema"])
        for t in interaction.request_body.get("tools", [])
        if "input_schema" in t
    ]


def user(text: str) -> Message:
    return Message(role="user", content=text)


def result(call_id: str, text: str, *, error: bool = False) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text, is_error=error)


async def events_of(model: AnthropicModel, messages: list[Message], tools=None):
    return [e async for e in model.stream(messages, tools)]


# ------------------------------------------------------------------------- recorded replays


async def test_thinking_signature_replayed_before_tool_use(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_anthropic_tool_with_thinking.yaml")
    server.queue = list(tape)
    model = make_model(
        server, "claude-sonnet-4-0", thinking=ThinkingConfig(enabled=True, budget_tokens=3000)
    )
    tools = recorded_tools(tape[0])
    messages = [user("What is the largest city in the user country?")]

    first = await model.complete(messages, tools)
    recorded = tape[0].json_body["content"]
    assert first.content == recorded[1]["text"]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {})
    ]
    [thought] = first.thinking
    assert thought.text == recorded[0]["thinking"]
    assert thought.signature == recorded[0]["signature"]
    assert thought.provider == "anthropic" and not thought.redacted
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (398, 155)

    messages += [first.as_message(), result(first.tool_calls[0].id, "Mexico")]
    second = await model.complete(messages, tools)
    assert second.content.startswith("Based on the information that you're from Mexico")
    assert second.finish_reason == "stop" and not second.tool_calls

    sent = server.bodies()
    # What we sent on the next turn is byte-for-byte what the real client sent: the thinking
    # block with its signature first, then the text, then tool_use, then the tool_result.
    assert uncached(sent[1]["messages"]) == tape[1].request_body["messages"]
    for body, rec in zip(sent, tape, strict=True):
        assert (
            body["thinking"]
            == rec.request_body["thinking"]
            == {"type": "enabled", "budget_tokens": 3000}
        )
        assert uncached(body["tools"]) == rec.request_body["tools"]
        assert body["max_tokens"] > 3000 and "temperature" not in body
    assert server.received[0].path == "/v1/messages"
    headers = {k.lower(): v for k, v in server.received[0].headers.items()}
    # SDK versions differ on the header (x-api-key, or Authorization: Bearer); the key travels.
    assert "sk-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


async def test_redacted_thinking_replayed_verbatim(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_anthropic_model_thinking_part_redacted.yaml")
    server.queue = list(tape)
    model = make_model(
        server,
        "claude-sonnet-4-5-20250929",
        thinking=ThinkingConfig(enabled=True, budget_tokens=1024),
    )
    messages = [user(tape[0].request_body["messages"][0]["content"][0]["text"])]
    first = await model.complete(messages)
    [block] = first.thinking
    assert block.redacted and block.data == tape[0].json_body["content"][0]["data"]
    assert block.text == "" and block.signature is None
    messages += [first.as_message(), user("What was that?")]
    second = await model.complete(messages)
    assert second.thinking[0].data == tape[1].json_body["content"][0]["data"]
    assert uncached(server.bodies()[1]["messages"]) == tape[1].request_body["messages"]


async def test_parallel_tool_calls_and_merged_results(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_multiple_parallel_tool_calls.yaml")
    server.queue = list(tape)
    model = make_model(server, "claude-haiku-4-5")
    tools = recorded_tools(tape[0])
    messages = [
        Message(role="system", content=tape[0].request_body["system"]),
        user("Alice, Bob, Charlie and Daisy are a family. Who is the youngest?"),
    ]
    first = await model.complete(messages, tools)
    assert [json.loads(c.arguments)["name"] for c in first.tool_calls] == [
        "Alice",
        "Bob",
        "Charlie",
        "Daisy",
    ]
    assert len({c.id for c in first.tool_calls}) == 4
    answers = {
        "Alice": "alice is bob's wife",
        "Bob": "bob is alice's husband",
        "Charlie": "charlie is alice's son",
        "Daisy": "daisy is bob's daughter and charlie's younger sister",
    }
    messages.append(first.as_message())
    for call in first.tool_calls:
        messages.append(result(call.id, answers[json.loads(call.arguments)["name"]]))
    second = await model.complete(messages, tools)
    assert "Daisy is the youngest" in second.content
    sent = server.bodies()
    # Four results in ONE user turn, in call order.
    assert uncached(sent[1]["messages"]) == tape[1].request_body["messages"]
    assert uncached(sent[0])["system"] == tape[0].request_body["system"]


@pytest.mark.parametrize(
    "name",
    [
        "test_anthropic_mixed_strict_tool_run.yaml",
        "test_anthropic_tool_output.yaml",
        "tool_choice_auto.yaml",
    ],
)
async def test_sequential_tool_runs(server: RawReplayServer, name: str) -> None:
    """Replay each recorded run turn by turn: every request we send carries the same history."""
    tape = load_cassette(CASSETTES + name)
    server.queue = list(tape)
    model = make_model(server)
    tools = recorded_tools(tape[0])
    first_request = tape[0].request_body
    messages: list[Message] = []
    if "system" in first_request:
        messages.append(Message(role="system", content=first_request["system"]))
    messages.append(user(first_request["messages"][0]["content"][0]["text"]))
    for turn, interaction in enumerate(tape):
        response = await model.complete(messages, tools)
        recorded_blocks = interaction.json_body["content"]
        assert [c.id for c in response.tool_calls] == [
            b["id"] for b in recorded_blocks if b["type"] == "tool_use"
        ]
        assert uncached(server.bodies()[turn]["messages"]) == interaction.request_body["messages"]
        if turn + 1 < len(tape):
            messages.append(response.as_message())
            # The tool results the real client sent next, fed back through our vocabulary.
            for block in tape[turn + 1].request_body["messages"][-1]["content"]:
                messages.append(result(block["tool_use_id"], block["content"]))
    assert response.finish_reason in ("stop", "tool_calls")


async def test_streamed_thinking(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_anthropic_model_thinking_part_stream.yaml")
    server.queue = list(tape)
    model = make_model(
        server, "claude-sonnet-4-0", thinking=ThinkingConfig(enabled=True, budget_tokens=1024)
    )
    events = await events_of(model, [user("How do I cross the street?")])
    kinds = [e.type for e in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert kinds.index("text") > max(i for i, k in enumerate(kinds) if k == "thinking")
    response = events[-1].response
    thinking_text = "".join(e.text for e in events if e.type == "thinking")
    assert response.thinking[0].text == thinking_text
    assert thinking_text.startswith("This is a straightforward question about pedestrian safety")
    assert response.thinking[0].signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK")
    assert response.content == "".join(e.text for e in events if e.type == "text")
    assert response.content.startswith("Here are the basic steps for safely crossing the street")
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens == 43 and response.usage.output_tokens > 1
    assert server.bodies()[0]["stream"] is True
    # The streamed block replays exactly like a non-streamed one.
    _, turns = to_anthropic_messages([response.as_message()])
    assert turns[0]["content"][0] == {
        "type": "thinking",
        "thinking": thinking_text,
        "signature": response.thinking[0].signature,
    }


async def test_streamed_input_json_delta_with_server_tool_blocks(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_anthropic_native_tool_search_streaming.yaml")
    server.queue = list(tape)
    model = make_model(server, "claude-sonnet-4-6")
    tools = recorded_tools(tape[0])
    messages = [user("What is the current USD to EUR exchange rate?")]
    events = await events_of(model, messages, tools)
    starts = [e for e in events if e.type == "tool_call_start"]
    ends = [e for e in events if e.type == "tool_call_end"]
    # The server-side tool_search block is Anthropic's business: only our function surfaces.
    assert [(e.index, e.tool_call.name) for e in starts] == [(0, "get_exchange_rate")]
    assert starts[0].tool_call.arguments == ""
    deltas = "".join(e.text for e in events if e.type == "tool_call_delta")
    assert json.loads(deltas) == {"from_currency": "USD", "to_currency": "EUR"}
    response = events[-1].response
    assert ends[0].tool_call.arguments == deltas == response.tool_calls[0].arguments
    assert response.tool_calls[0].id == "toolu_01EFn5wTNBYA8Reni8rbmnHT"
    assert response.content == (
        "Let me search for a tool that can provide current exchange rate information.\n\n"
        "I found the right tool! Let me fetch the current USD to EUR exchange rate for you."
    )
    assert response.content == "".join(e.text for e in events if e.type == "text")
    assert response.usage.input_tokens == 1591 and response.usage.output_tokens == 175

    messages += [response.as_message(), result(response.tool_calls[0].id, "1 USD = 0.92 EUR")]
    final = await collect(model.stream(messages, tools))
    assert final.content.startswith("The current exchange rate is **1 USD = 0.92 EUR**")
    sent = server.bodies()[1]["messages"]
    assert uncached(sent[1]["content"][-1]) == tape[1].request_body["messages"][1]["content"][-1]
    assert uncached(sent[2]["content"][0]) == {
        "type": "tool_result",
        "is_error": False,
        "tool_use_id": "toolu_01EFn5wTNBYA8Reni8rbmnHT",
        "content": "1 USD = 0.92 EUR",
    }


# ------------------------------------------------------------------------- scripted cases

_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 1},
    },
}
_TOOL_OPEN = [
    _START,
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {
            "type": "tool_use",
            "id": "toolu_cut",
            "name": "reminder_set",
            "input": {},
        },
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"text": "stand'},
    },
]


async def test_stream_cut_mid_tool_call(server: RawReplayServer) -> None:
    server.queue = [cut_off_after(sse(_TOOL_OPEN))]
    model = make_model(server, max_retries=0)
    seen: list[StreamEvent] = []
    with pytest.raises(StreamInterrupted):
        async for event in model.stream([user("remind me")]):
            seen.append(event)
    assert not [e for e in seen if e.type in ("tool_call_end", "done")]


async def test_stream_ending_cleanly_but_early(server: RawReplayServer) -> None:
    """A complete HTTP body without content_block_stop / message_stop is still cut off."""
    server.queue = [
        Interaction(None, "", 200, raw_body=sse(_TOOL_OPEN), content_type="text/event-stream")
    ]
    model = make_model(server)
    seen: list[str] = []
    with pytest.raises(StreamInterrupted, match="reminder_set"):
        async for event in model.stream([user("remind me")]):
            seen.append(event.type)
    assert seen == ["tool_call_start", "tool_call_delta"]


def _message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


_RATE_LIMITED = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
}


async def test_429_then_success(server: RawReplayServer) -> None:
    server.queue = [
        json_reply(_RATE_LIMITED, 429, {"retry-after-ms": "10"}),
        json_reply(_message("after the wait")),
    ]
    response = await make_model(server, max_retries=2).complete([user("hi")])
    assert response.content == "after the wait"
    assert len(server.received) == 2


async def test_429_exhausted_and_other_statuses(server: RawReplayServer) -> None:
    server.queue = [json_reply(_RATE_LIMITED, 429, {"retry-after-ms": "10"})]
    with pytest.raises(ProviderRateLimited) as info:
        await make_model(server, max_retries=0).complete([user("hi")])
    assert info.value.status == 429 and info.value.retryable
    server.queue = [
        json_reply(
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
            401,
        )
    ]
    with pytest.raises(ProviderAuthError):
        await make_model(server, max_retries=0).complete([user("hi")])
    server.queue = [
        json_reply(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, 529
        )
    ]
    with pytest.raises(ProviderUnavailable):
        await make_model(server, max_retries=0).complete([user("hi")])


async def test_400(server: RawReplayServer) -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages.1.content.0.thinking.signature: Invalid signature",
        },
    }
    server.queue = [json_reply(body, 400)]
    model = make_model(server)
    with pytest.raises(ProviderBadRequest) as info:
        await model.complete([user("hi")])
    assert info.value.status == 400 and "Invalid signature" in str(info.value)
    assert not info.value.retryable and len(server.received) == 1  # never retried
    server.queue = [json_reply(body, 400)]
    with pytest.raises(ProviderBadRequest):
        await collect(model.stream([user("hi")]))


async def test_stream_error_event(server: RawReplayServer) -> None:
    """Anthropic reports overload inside a 200 stream as an `error` event."""
    text = sse(
        [_START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    )
    server.queue = [Interaction(None, "", 200, raw_body=text, content_type="text/event-stream")]
    with pytest.raises(ProviderUnavailable):
        await collect(make_model(server).stream([user("hi")]))


# ------------------------------------------------------------------------- conversions


def test_request_shape_without_a_server() -> None:
    cfg = ModelConfig(
        provider="anthropic",
        model="claude-test",
        api_key="k",
        base_url="http://127.0.0.1:9",
        temperature=0.3,
        max_tokens=100,
    )
    model = AnthropicModel("c", cfg)

    messages = [
        Message(role="system", content="be brief"),
        Message(role="system", content="be kind"),
        user("hi"),
        Message(
            role="assistant",
            content="",
            tool_calls=[
                ToolCall(id="t1", name="f", arguments='{"a": 1}'),
                ToolCall(id="t2", name="f", arguments="not json"),
            ],
            thinking=[
                ThinkingBlock(text="from deepseek", provider="deepseek"),
                ThinkingBlock(redacted=True, data="xx", provider="anthropic"),
            ],
        ),
        result("t1", "ok"),
        result("t2", "arguments are not valid JSON", error=True),
        user("and now?"),
    ]
    request = model.build_request(messages, None)
    # Cache breakpoints: the system prompt, and the last block of the last two turns.
    assert request["system"] == [
        {"type": "text", "text": "be brief\n\nbe kind", "cache_control": {"type": "ephemeral"}}
    ]
    request = uncached(request)
    assert request["temperature"] == 0.3 and request["max_tokens"] == 100
    assert "tools" not in request and "thinking" not in request
    assistant, results = request["messages"][1], request["messages"][2]
    assert assistant["content"] == [
        {"type": "redacted_thinking", "data": "xx"},  # deepseek reasoning has no signature here
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
    ]
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": False},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": "arguments are not valid JSON",
                "is_error": True,
            },
            {"type": "text", "text": "and now?"},
        ],
    }
    assert len(request["messages"]) == 3


async def test_timeout(server: RawReplayServer) -> None:
    server.latency = 1.0
    with pytest.raises(ProviderTimeout):
        await make_model(server, timeout=0.2, max_retries=0).complete([user("hi")])


def test_anthropic_without_key_is_auth_error_at_build(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    cfg = ModelConfig(provider="anthropic", model="claude-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        build_model("claude", cfg)
