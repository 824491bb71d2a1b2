"""TextToolsModel: history rewriting on the way in, parsing on the way out."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from providers.base import ChatModel, collect
from providers.text_tools.model import TextToolsModel, rewrite_messages
from providers.types import LLMResponse, Message, ModelCapabilities, ToolCall, ToolDefinition

from .fake_model import FakeModel

REMIND = ToolDefinition(
    "reminder_set",
    "Set a reminder.",
    {
        "type": "object",
        "properties": {"at": {"type": "string"}, "minutes": {"type": "integer"}},
    },
)
CALL_REPLY = (
    'OK.<tool_call>{"name": "reminder_set", "arguments": {"at": "9:00"}}</tool_call>'
    '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'
)


def history() -> list[Message]:
    return [
        Message(role="system", content="You are helpful."),
        Message(role="user", content="remind me twice"),
        Message(
            role="assistant",
            content="Setting them.",
            tool_calls=[
                ToolCall(id="a", name="reminder_set", arguments='{"at": "9:00"}'),
                ToolCall(id="b", name="reminder_set", arguments='{"at": "10:00"}'),
            ],
        ),
        Message(role="tool", tool_call_id="a", content="done"),
        Message(role="tool", tool_call_id="b", content="clash", is_error=True),
        Message(role="user", content="thanks"),
    ]


def test_rewrite_appends_tools_to_system_and_turns_tool_history_into_text() -> None:
    out = rewrite_messages(history(), [REMIND], "hermes")
    assert [m.role for m in out] == ["system", "user", "assistant", "user", "user"]
    assert out[0].content.startswith("You are helpful.\n\n# Tools")
    assert "reminder_set" in out[0].content
    assert out[2].tool_calls == []
    assert out[2].content == (
        "Setting them.\n"
        '<tool_call>{"name":"reminder_set","arguments":{"at":"9:00"}}</tool_call>\n'
        '<tool_call>{"name":"reminder_set","arguments":{"at":"10:00"}}</tool_call>'
    )
    # consecutive results are merged into one user turn, names recovered from the call ids
    assert out[3].content == (
        '<tool_result name="reminder_set">done</tool_result>\n'
        '<tool_result name="reminder_set" error="true">clash</tool_result>'
    )
    assert history()[2].tool_calls  # the caller's messages are not mutated


def test_rewrite_adds_a_system_message_or_uses_the_first_user_turn() -> None:
    msgs = [Message(role="user", content="hi")]
    out = rewrite_messages(msgs, [REMIND], "xml_tag")
    assert out[0].role == "system" and '<tool name="NAME">' in out[0].content
    out = rewrite_messages(msgs, [REMIND], "xml_tag", system_message=False)
    assert len(out) == 1 and out[0].content.endswith("\n\nhi") and "# Tools" in out[0].content


async def test_complete_parses_calls_and_only_offered_names_count() -> None:
    inner = FakeModel([CALL_REPLY])
    model = TextToolsModel(inner)
    response = await model.complete(history(), [REMIND])
    sent, tools_sent = inner.sent[0]
    assert tools_sent is None  # the inner model never sees `tools`
    assert sent[0].role == "system" and "<tool_call>" in sent[0].content
    assert sent[-1].content == "thanks"
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("reminder_set", {"at": "9:00"})
    ]
    assert response.finish_reason == "tool_calls"
    assert response.content.startswith("OK.") and "rm_rf" in response.content
    assert model.capabilities.native_tools is False


@pytest.mark.parametrize("chunk", [1, 3, 64])
async def test_stream_reemits_events_and_ends_with_done(chunk) -> None:
    inner = FakeModel(["<think>hmm</think>" + CALL_REPLY], thinking="native reasoning", chunk=chunk)
    model = TextToolsModel(inner, "hermes")
    events = [e async for e in model.stream(history(), [REMIND])]
    assert events[-1].type == "done"
    assert sum(e.type == "done" for e in events) == 1
    starts = [e for e in events if e.type == "tool_call_start"]
    assert [e.tool_call.name for e in starts] == ["reminder_set"]
    response = events[-1].response
    assert response.tool_calls[0].id == starts[0].tool_call.id
    # reasoning stays reasoning: the inner model's block and the <think> block in the text
    assert [t.text for t in response.thinking] == ["native reasoning", "hmm"]
    assert "hmm" not in (response.content or "")
    text = "".join(e.text for e in events if e.type == "text")
    assert text.startswith("OK.") and "<think>" not in text


async def test_collect_gives_the_same_as_complete() -> None:
    a = await TextToolsModel(FakeModel([CALL_REPLY])).complete(history(), [REMIND])
    b = await collect(TextToolsModel(FakeModel([CALL_REPLY])).stream(history(), [REMIND]))
    assert (a.content, [(c.name, c.arguments) for c in a.tool_calls]) == (
        b.content,
        [(c.name, c.arguments) for c in b.tool_calls],
    )


async def test_without_tools_nothing_is_parsed_as_a_call() -> None:
    response = await TextToolsModel(FakeModel([CALL_REPLY])).complete(history(), None)
    assert response.tool_calls == [] and "<tool_call>" in response.content


class _Inner(ChatModel):
    provider = "fake"

    def __init__(self) -> None:
        super().__init__("m", "m", ModelCapabilities(native_tools=False))
        self.closed = False

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        return LLMResponse(content="ok")

    async def aclose(self) -> None:
        self.closed = True


async def test_text_tools_model_closes_inner_model() -> None:
    inner = _Inner()
    await TextToolsModel(inner).aclose()
    assert inner.closed
