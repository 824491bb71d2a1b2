"""Property tests: chunking never changes the result, and no character of text is ever lost."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.text_tools.parser import StreamingToolParser, parse_text
from providers.text_tools.report import allowed_for, load_cases, schemas_for

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
    # Every character is in exactly one segment: text, reasoning (with its tags) or a call.
    assert "".join(s.raw for s in whole.segments) == text
    if not offered:
        assert not whole.calls
    if not whole.calls and not whole.thinking and "<think>" not in text:
        assert whole.content == text
    assert _summary(_stream(text, cuts, offered)) == _summary(whole)


@SETTINGS
@given(
    text=st.text(alphabet=st.characters(blacklist_characters="<"), max_size=300),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=20),
)
def test_text_without_calls_streams_unchanged(text, cuts) -> None:
    assert _stream(text, cuts, set()).content == text
