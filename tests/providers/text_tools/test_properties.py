"""Property tests: chunking never changes the result, and no character of text is ever lost."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from providers.text_tools.parser import StreamingToolParser, parse_text
from providers.text_tools.report import allowed_for, load_cases, schemas_for
from providers.text_tools.trigger import may_hold_call

CASE_LIST = load_cases()
assert CASE_LIST, "no real-output cases found under tests/fixtures/text_tool_calls"
# TEXT_TOOLS_EXAMPLES=5000 for a longer fuzzing run (passes; ~1 min).
SETTINGS = settings(
    max_examples=int(os.environ.get("TEXT_TOOLS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Pieces of every marker the parser knows, so random text hits partial and nested markers.
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<tool_c",
    "</thi",
    "{",
    "}",
    "[",
    "]",
    '{"name": "f", "arguments": {"x": 1}}',
    '"name"',
    ": ",
    ", ",
    "'",
    '"',
    "\\",
    "\n",
    "```",
    "```json\n",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "[f(x=1)]",
    "f(",
    ")",
    "<f>",
    "</f>",
    "<x>",
    "<function=f>",
    "<parameter=x>",
    "</function>",
    '<tool name="f">',
    "</tool>",
    "functools",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|>",
    "<arg_key>",
    "<arg_value>",
    # dialects added for issue 13
    "<|channel|>analysis<|message|>",
    "<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
    "<|channel|>final<|message|>",
    "<|start|>assistant",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<minimax:tool_call>",
    '<invoke name="f">',
    '<parameter name="x">',
    "</parameter>",
    "</invoke>",
    "</minimax:tool_call>",
    "```tool_code\n",
    "<start_function_call>call:f{x:<escape>",
    "<escape>}<end_function_call>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|START_RESPONSE|>",
    "\nAction: ```json\n",
    ">>>all\n",
    "\n>>>f\n",
    "<|python_tag|>f.call(",
    "<|eom_id|>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    '<function name="f">',
    "[THINK]",
    "[/THINK]",
    "[CALL_ID]",
    "[ARGS]",
    "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "<｜tool▁calls▁begin>",
    '<tool_result name="f">',
    "</tool_result>",
    # added with upstream_2026b.jsonl: replies that begin inside a header, variants
    "all\n",
    "f\n",
    ">>>",
    " to=functions.f",
    "<|channel|>commentary to=assistant",
    "<|channel|> final<|message|> ",
    "<|start|> assistant to=functions.f",
    '<function name="f">',
    '<param name="x">',
    "</param>",
    "<![CDATA[",
    "]]>",
    "<start_function_call>call:f{x:<escape>1<escape>y:<escape>",
    "```tool_code\n",
    '[{"name": "f", "arguments": {}}]',
    "\n```",
    "```json\n<function_call>",
    "</function_call>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    '<|tool_call>call:f{x:<|"|>',
    '<|"|>}<tool_call|>',
    "<|channel>thought\n",
    "<channel|>",
    # added with upstream_2026c.jsonl (issue 22)
    "<|tool_call_begin|>0 <|tool_call_argument_begin|>",
    '{"s": "<|tool_calls_section_end|>',
    '\\"}',
    "<function_calls>f(x=1)\n",
    "</function_calls>",
    "<｜tool_calls_begin｜><｜tool_call_begin｜>",
    '<steptml:invoke name="f"><steptml:parameter name="x">',
    "</steptml:parameter></steptml:invoke><｜tool_call_end｜>",
    "<function_call> {",
    "</parameter1>",
    "<｜DSML｜function_calls>",
    '<｜DSML｜parameter name="x" string="true">',
    "统计",
    ";",
    " ",
    "hello",
    "é",
    "燃",
]
fuzz_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=40).map("".join),
)


def _stream(text: str, cuts: list[int], allowed, schemas=None):
    parser = StreamingToolParser(allowed, schemas)
    points = sorted({c % (len(text) + 1) for c in cuts})
    last = 0
    for p in [*points, len(text)]:
        parser.feed(text[last:p])
        last = p
    parser.finish()
    return parser.result()


def _summary(parsed):
    return (
        [(c.name, c.arguments) for c in parsed.calls],
        parsed.content,
        parsed.thinking,
        [(s.kind, s.raw) for s in parsed.segments],
    )


@SETTINGS
@given(
    index=st.integers(min_value=0, max_value=max(len(CASE_LIST) - 1, 0)),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_any_split_of_any_case_gives_the_same_result(index: int, cuts: list[int]) -> None:
    case = CASE_LIST[index]
    allowed, schemas = allowed_for(index, case), schemas_for(case)
    whole = parse_text(case["text"], allowed, schemas)
    assert _summary(_stream(case["text"], cuts, allowed, schemas)) == _summary(whole)


@SETTINGS
@given(
    text=fuzz_text,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=20),
    offered=st.sampled_from([set(), {"f"}, {"f", "x"}]),
)
def test_arbitrary_text_never_raises_and_every_character_is_kept(text, cuts, offered) -> None:
    whole = parse_text(text, offered)
    # Every character is in exactly one segment: text, reasoning (with its tags), a call or
    # markup (template tokens), and the visible content is exactly the text segments.
    assert "".join(s.raw for s in whole.segments) == text
    assert whole.content == "".join(s.raw for s in whole.segments if s.kind == "text")
    if not offered:
        assert not whole.calls
    if all(s.kind == "text" for s in whole.segments):
        assert whole.content == text
    assert _summary(_stream(text, cuts, offered)) == _summary(whole)


@SETTINGS
@given(
    text=fuzz_text,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=20),
    fmt=st.sampled_from(["hermes", "xml_tag", "function_call", "json_block"]),
)
def test_asked_format_fences_stream_like_whole(text, cuts, fmt) -> None:
    """The fenced-call candidate (held to the end of the reply) never changes the result."""
    text = "```\n" + text if len(text) % 2 else text
    whole = StreamingToolParser({"f"}, fmt=fmt)
    whole.feed(text)
    whole.finish()
    streamed = StreamingToolParser({"f"}, fmt=fmt)
    points = sorted({c % (len(text) + 1) for c in cuts})
    last = 0
    events = []
    for p in [*points, len(text)]:
        events += streamed.feed(text[last:p])
        last = p
    events += streamed.finish()
    assert _summary(streamed.result()) == _summary(whole.result())
    assert "".join(s.raw for s in whole.result().segments) == text
    shown = "".join(e.text for e in events if e.type == "text")
    assert shown == whole.result().content


@SETTINGS
@given(
    text=st.text(alphabet=st.characters(blacklist_characters="<"), max_size=300),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=20),
)
def test_text_without_calls_streams_unchanged(text, cuts) -> None:
    # A reply that begins `all\n` is Functionary's header for text to the user, by design
    # (reply_start.py, test_reply_start.py): the one marker this alphabet can still spell.
    # Hypothesis reads string constants out of the code under test, so it does spell it.
    assume(not text.startswith("all\n"))
    assert _stream(text, cuts, set()).content == text


def test_a_reply_beginning_with_functionarys_header_loses_only_the_header() -> None:
    assert _stream("all\n", [], set()).content == ""
    assert _stream("all\nof them", [2, 5], set()).content == "of them"
    assert _stream("all of them\n", [3], set()).content == "all of them\n"


def test_every_recorded_call_is_seen_by_the_cheap_trigger_check() -> None:
    """The tool loop skips the parser for a reply `may_hold_call` rules out: no recorded case
    that parses to a call may be ruled out."""
    for index, case in enumerate(CASE_LIST):
        parsed = parse_text(case["text"], allowed_for(index, case), schemas_for(case))
        if parsed.calls:
            assert may_hold_call(case["text"]), case["file"]


@SETTINGS
@given(text=fuzz_text, offered=st.sampled_from([{"f"}, {"f", "x"}]))
def test_text_the_trigger_check_rules_out_parses_to_itself(text, offered) -> None:
    # Strip every trigger character so the property is exercised on most examples.
    plain = text.translate({ord(c): None for c in "<[{`"}).replace(">>>", ">")
    plain = plain.replace("functools", "func").replace("Action:", "Act")
    for candidate in (text, plain):
        if not may_hold_call(candidate):
            parsed = parse_text(candidate, offered)
            assert not parsed.calls and parsed.content == candidate
