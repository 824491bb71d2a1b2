"""The documented policies of the parser (README.md), one test each."""

from __future__ import annotations

import json

from providers.text_tools.parser import StreamingToolParser, parse_text


def calls(text: str, allowed=("f",)) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in parse_text(text, set(allowed)).calls]


def test_only_offered_names_are_calls_and_others_stay_text() -> None:
    text = '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    parsed = parse_text(text, {"f"})
    assert parsed.calls == [] and parsed.content == text and parsed.rejected == ["g"]


def test_calls_inside_think_are_never_executed() -> None:
    text = '<think>maybe <tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call></think>ok'
    parsed = parse_text(text, {"f"})
    assert parsed.calls == []
    assert parsed.content == "ok"
    assert "tool_call" in parsed.thinking


def test_code_fence_examples_are_content_except_a_json_call_fence() -> None:
    example = 'Example:\n```xml\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n```\n'
    assert calls(example) == []
    python = "```python\n[f(x=1)]\n```"
    assert calls(python) == []
    json_fence = '```json\n{"tool": "f", "arguments": {"x": 2}}\n```'
    assert calls(json_fence) == [("f", {"x": 2})]
    answer = '```json\n{"name": "f", "value": 3}\n```'  # JSON the user asked for: no arguments
    assert calls(answer) == []


def test_truncated_json_call_is_accepted_only_when_only_closers_are_missing() -> None:
    assert calls('<tool_call>{"name": "f", "arguments": {"x": 1}') == [("f", {"x": 1})]
    assert calls('<tool_call>{"name": "f", "arguments": {"x": "hal') == []
    assert calls('<tool_call>{"name": "f", "arguments": {"x": ') == []


def test_truncated_raw_text_dialects_are_never_executed() -> None:
    assert calls("<tool_call>f<arg_key>x</arg_key><arg_value>1</arg_value>") == []
    assert calls("<function=f>\n<parameter=x>\n1\n") == []


def test_tolerant_arguments_repair_order() -> None:
    assert calls('<tool_call>{"name": "f", "arguments": {"s": "a\nb"}}</tool_call>') == [
        ("f", {"s": "a\nb"})
    ]  # raw control character
    assert calls("<tool_call>{'name': 'f', 'arguments': {'v': None, 'b': True}}</tool_call>") == [
        ("f", {"v": None, "b": True})
    ]  # Python literals via ast.literal_eval, not json_repair's string 'None'
    assert calls('<tool_call>{"name": "f", "arguments": {"x": 1,}}</tool_call>') == [
        ("f", {"x": 1})
    ]


def test_text_streams_immediately_and_only_a_possible_marker_is_held() -> None:
    parser = StreamingToolParser({"f"})
    events = parser.feed("Hello there <tool_c")
    assert [e.text for e in events if e.type == "text"] == ["Hello there "]
    events = parser.feed("ake is nice")
    assert "".join(e.text for e in events if e.type == "text") == "<tool_cake is nice"
    assert parser.finish() == []


def test_events_order_text_call_text() -> None:
    parser = StreamingToolParser({"f"})
    events = []
    for chunk in ["A ", '<tool_call>{"name": "f", ', '"arguments": {}}</tool_call>', " B"]:
        events += parser.feed(chunk)
    events += parser.finish()
    kinds = [e.type for e in events]
    assert kinds == ["text", "tool_call_start", "tool_call_end", "text"]
    assert events[1].tool_call.id.startswith("call_")
    assert events[1].tool_call is events[2].tool_call


def test_bare_json_requires_the_call_shape() -> None:
    assert calls('Here: {"name": "f", "parameters": {}} done') == [("f", {})]
    assert calls('{"name": "f"}') == []
    assert calls('{"name": "f", "result": 1}') == []


def test_thinking_events_are_emitted_separately() -> None:
    parser = StreamingToolParser(set())
    events = parser.feed("<think>plan") + parser.feed(" more</think>answer") + parser.finish()
    assert "".join(e.text for e in events if e.type == "thinking") == "plan more"
    assert "".join(e.text for e in events if e.type == "text") == "answer"
