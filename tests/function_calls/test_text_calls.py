"""`NativeTextFilter` (a streamed native-mode answer) agrees with `text_calls_as_native` (the
same answer whole) at every chunk size: ordinary text is shown exactly, call markup never."""

from __future__ import annotations

import pytest

from function_calls.text_calls import NativeTextFilter, text_calls_as_native
from providers.types import LLMResponse, StreamEvent, ToolCall, ToolDefinition

TOOLS = [
    ToolDefinition(
        "weather",
        "Weather in a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
]
CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
PLAIN = [
    "Sunny in Oslo.",
    "Compare a < b and <tool> tags; x<y.\n\n- one\n- two",
    "<think>Maybe call weather.</think>It is sunny.",
    '```python\nweather(city="Oslo")\n```\nThat is how.',
    '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',  # not offered: text
    "Ends with a lone <",
]


def _stream(text: str, size: int) -> tuple[str, list[StreamEvent], LLMResponse]:
    f = NativeTextFilter(TOOLS)
    shown: list[StreamEvent] = []
    for i in range(0, len(text), size):
        shown += f.feed(StreamEvent(type="text", text=text[i : i + size]))
    rest, final = f.finish(LLMResponse(content=text, finish_reason="stop"))
    shown += rest
    assert final is not None
    return "".join(e.text for e in shown if e.type == "text"), shown, final


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 1000])
@pytest.mark.parametrize("text", PLAIN)
def test_text_without_a_call_is_shown_exactly(text: str, size: int) -> None:
    shown, events, final = _stream(text, size)
    assert shown == text
    assert final.content == text and not final.tool_calls
    assert final == text_calls_as_native(LLMResponse(content=text, finish_reason="stop"), TOOLS)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 1000])
def test_call_markup_is_never_shown(size: int) -> None:
    text = f"Let me look.\n{CALL}\nOne moment."
    shown, events, final = _stream(text, size)
    assert shown == "Let me look.\n\nOne moment."
    assert [e.type for e in events if e.type != "text"] == ["tool_call_start", "tool_call_end"]
    [call] = final.tool_calls
    assert call.name == "weather" and call.arguments == '{"city": "Oslo"}'
    assert final.finish_reason == "tool_calls" and final.content == "Let me look.\n\nOne moment."
    whole = text_calls_as_native(LLMResponse(content=text), TOOLS)
    assert whole.content == final.content and [c.name for c in whole.tool_calls] == ["weather"]


def test_text_streams_as_it_comes() -> None:
    """Only what may still start a call is held: a word is out before the next chunk."""
    f = NativeTextFilter(TOOLS)
    assert [e.text for e in f.feed(StreamEvent(type="text", text="Hello there"))] == ["Hello there"]
    assert f.feed(StreamEvent(type="text", text=" <tool_")) == [StreamEvent(type="text", text=" ")]


def test_native_calls_win_and_other_events_pass() -> None:
    f = NativeTextFilter(TOOLS)
    thinking = StreamEvent(type="thinking", text="hm")
    assert f.feed(thinking) == [thinking]
    f.feed(StreamEvent(type="text", text=CALL))
    native = LLMResponse(content=CALL, tool_calls=[ToolCall("c1", "weather", "{}")])
    rest, final = f.finish(native)
    assert final is native and rest == []


FENCED = '```tool_code\nweather(city="Oslo")\n```'


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize(
    "text",
    [
        f"Sure.\n{FENCED}\nDone.",  # a lone tool_code fence: a call, decided at the end
        f"{FENCED}\n{CALL}",  # another call: the fence stays text
        f"<think>hm</think>{CALL}\nok",
    ],
)
def test_shown_is_the_answer_minus_its_calls(text: str, size: int) -> None:
    """Whatever the parser decides, the stream shows every segment that is not a call, in
    order, once (a fence that may be a call is held until the answer ends)."""
    from providers.text_tools.parser import parse_text

    parsed = parse_text(text, ["weather"], {t.name: t.parameters for t in TOOLS})
    shown, _, final = _stream(text, size)
    assert shown == "".join(s.raw for s in parsed.segments if s.kind != "call")
    assert [c.name for c in final.tool_calls] == [c.name for c in parsed.calls]
    assert final.tool_calls, "each of these answers holds a call"
