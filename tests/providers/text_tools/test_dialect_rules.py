"""Issue 13's rules, decided per family in providers/text_tools/README.md: both sides of each,
whole and streamed in 1-, 3- and 7-character chunks."""

from __future__ import annotations

import json

import pytest

from providers.text_tools.args import coerce_raw
from providers.text_tools.parser import StreamingToolParser

CHUNKS = (None, 1, 3, 7)


def run(text: str, allowed=("f",), fmt: str | None = None, schemas=None, size: int | None = None):
    parser = StreamingToolParser(set(allowed), schemas, fmt=fmt)
    events = []
    pieces = [text] if size is None else [text[i : i + size] for i in range(0, len(text), size)]
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.finish()
    parsed = parser.result()
    shown = "".join(e.text for e in events if e.type == "text")
    assert shown == parsed.content  # what was streamed is what the result says
    assert "".join(s.raw for s in parsed.segments) == text
    return [(c.name, json.loads(c.arguments)) for c in parsed.calls], parsed


def each_split(text: str, **kw):
    results = [run(text, size=size, **kw) for size in CHUNKS]
    first = results[0]
    for calls, parsed in results[1:]:
        assert calls == first[0]
        assert parsed.content == first[1].content and parsed.thinking == first[1].thinking
    return first


KIMI = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
    '{"x": 1}<|tool_call_end|><|tool_calls_section_end|>'
)
GLM = "<tool_call>f<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>"
INT_X = {"f": {"type": "object", "properties": {"x": {"type": "integer"}}}}
HERMES = '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'


@pytest.mark.parametrize("call", [KIMI, GLM], ids=["kimi", "glm"])
def test_kimi_and_glm_call_in_reasoning_that_never_closes_runs(call: str) -> None:
    calls, parsed = each_split("<think>我来调用工具。" + call, schemas=INT_X)
    assert calls == [("f", {"x": 1})]
    assert parsed.thinking == "我来调用工具。" and parsed.content == ""


@pytest.mark.parametrize("call", [KIMI, GLM], ids=["kimi", "glm"])
def test_kimi_and_glm_call_in_reasoning_that_closes_afterwards_is_reasoning(call: str) -> None:
    calls, parsed = each_split("<think>草稿" + call + "不对</think>请问城市？")
    assert calls == []
    assert parsed.content == "请问城市？" and call in parsed.thinking


def test_other_families_calls_in_unclosed_reasoning_never_run() -> None:
    calls, parsed = each_split("<think>也许 " + HERMES)
    assert calls == [] and parsed.content == "" and HERMES in parsed.thinking


FENCED = '好的：\n```xml\n<tool_call>{"name": "f", "arguments": {"x": 2}}</tool_call>\n```\n'


def test_fenced_call_in_the_asked_format_alone_in_the_answer_runs() -> None:
    calls, parsed = each_split(FENCED, fmt="hermes")
    assert calls == [("f", {"x": 2})] and parsed.content == "好的：\n\n"


def test_fenced_call_is_an_example_when_the_answer_makes_another_call() -> None:
    calls, parsed = each_split(FENCED + "现在：" + HERMES, fmt="hermes")
    assert calls == [("f", {"x": 1})]
    assert parsed.content == FENCED + "现在："
    calls, _ = each_split(HERMES + FENCED, fmt="hermes")  # a call before it, too
    assert calls == [("f", {"x": 1})]


def test_fenced_call_in_another_format_or_with_more_text_stays_text() -> None:
    assert each_split(FENCED, fmt="json_block")[0] == []
    assert each_split(FENCED)[0] == []  # no format known: as before
    more = '```\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\nand more\n```'
    assert each_split(more, fmt="hermes")[0] == []


def test_fenced_candidate_holds_the_text_after_it_until_the_end() -> None:
    parser = StreamingToolParser({"f"}, fmt="hermes")
    events = parser.feed(FENCED + "之后的文字")
    assert [e.text for e in events if e.type == "text"] == ["好的：\n"]
    events = parser.finish()
    assert [e.type for e in events] == ["tool_call_start", "tool_call_end", "text"]


HARMONY_CALL = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"


def test_open_call_with_complete_arguments_runs_and_cut_arguments_do_not() -> None:
    assert each_split(HARMONY_CALL + '{"x": 1}')[0] == [("f", {"x": 1})]
    assert each_split(HARMONY_CALL + '{"x": "cu')[0] == []
    section = '<minimax:tool_call>\n<invoke name="f"><parameter name="x">1</parameter></invoke>'
    assert each_split(section)[0] == [("f", {"x": "1"})]
    assert each_split('<minimax:tool_call><invoke name="f"><parameter name="x">1')[0] == []
    kimi_open = KIMI.removesuffix("<|tool_calls_section_end|>")
    assert each_split(kimi_open)[0] == [("f", {"x": 1})]
    # No <|tool_call_end|> either (llama.cpp's "real life" Kimi output): complete JSON runs,
    # cut JSON does not.
    assert each_split(kimi_open.removesuffix("<|tool_call_end|>"))[0] == [("f", {"x": 1})]
    assert each_split(kimi_open.removesuffix("1}<|tool_call_end|>"))[0] == []
    bare = "<|tool_call_begin|>f:0<|tool_call_argument_begin|>"
    assert each_split(bare + '{"x": 1}' + bare + '{"x": 2}')[0] == [
        ("f", {"x": 1}),
        ("f", {"x": 2}),
    ]
    assert each_split(bare + '{"x": 1, "y":')[0] == []


def test_echoed_tool_result_markup_never_reaches_the_user() -> None:
    calls, parsed = each_split('<tool_result name="f">{"ok": true}</tool_result>\n完成了。')
    assert calls == [] and parsed.content == "\n完成了。"


def test_function_tag_with_json_is_a_call_and_with_prose_is_not() -> None:
    assert each_split('<function=f>{"x": 1}</function>')[0] == [("f", {"x": 1})]
    assert each_split("<function=f>请查询</function>")[0] == []


def test_qwen3_coder_stray_closing_tag_belongs_to_the_call() -> None:
    text = "文字<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"
    calls, parsed = each_split(text)
    assert calls == [("f", {"x": "1"})] and parsed.content == "文字"


def test_whitespace_inside_raw_values_is_data() -> None:
    seed = "<seed:tool_call><function=f><parameter=x>a\n</parameter></function></seed:tool_call>"
    assert each_split(seed)[0] == [("f", {"x": "a\n"})]
    qwen = "<tool_call><function=f><parameter=x>\n  a\n\n</parameter></function></tool_call>"
    assert each_split(qwen)[0] == [("f", {"x": "  a\n"})]


def test_union_types_follow_the_schema_in_order() -> None:
    assert coerce_raw("42", {"type": ["string", "integer"]}) == 42
    assert coerce_raw("007", {"type": ["string", "integer"]}) == "007"
    assert coerce_raw("null", {"type": ["string", "null"]}) is None
    assert coerce_raw("hello", {"type": ["string", "null"]}) == "hello"
    assert coerce_raw("true", {"anyOf": [{"type": "boolean"}, {"type": "null"}]}) is True
    assert coerce_raw("[1]", {"type": ["array", "string"]}) == [1]
    assert coerce_raw("42", {"type": ["number", "integer"]}) == 42


def test_pythonic_json_literals_and_magistral_think() -> None:
    lfm = '<|tool_call_start|>[f(m={"r": true, "n": null})]<|tool_call_end|>'
    assert each_split(lfm)[0] == [("f", {"m": {"r": True, "n": None}})]
    mag = '[THINK][TOOL_CALLS]f[ARGS]{"x": 1}[/THINK]好'
    calls, parsed = each_split(mag)
    assert calls == [] and parsed.content == "好"


def test_plain_prose_with_new_marker_lookalikes_is_untouched() -> None:
    text = "Action: none.\n>>> print(1)\n>>>\nfunctools is a module; <|channel|> is a token.\n"
    calls, parsed = each_split(text, allowed=("f", "print"))
    assert calls == [] and parsed.content == text
