"""Rules added with upstream_2026b.jsonl (providers/text_tools/README.md): replies that begin
inside a template's header (Functionary v3.2 without `>>>`, harmony ` to=`), the Seed-OSS
newline rule, and the smaller dialect variants. Both sides of each, whole and streamed in 1-, 3-
and 7-character chunks (each_split)."""

from __future__ import annotations

import pytest

from providers.text_tools.reply_start import reply_start
from tests.providers.text_tools.test_dialect_rules import INT_X, each_split


def test_functionary_reply_starting_with_all_is_text_for_the_user() -> None:
    calls, parsed = each_split("all\n好的，北京今天晴。", allowed=("get_weather",))
    assert calls == [] and parsed.content == "好的，北京今天晴。"
    assert [s.kind for s in parsed.segments] == ["markup", "text"]


def test_functionary_reply_starting_with_an_offered_name_and_json_is_a_call() -> None:
    calls, parsed = each_split('f\n{"x": 1}\n>>>all\n查好了。', schemas=INT_X)
    assert calls == [("f", {"x": 1})] and parsed.content == "\n查好了。"


def test_after_a_functionary_start_a_mid_line_marker_ends_the_text() -> None:
    calls, parsed = each_split('all\n我来查。>>>f\n{"x": 1}')
    assert calls == [("f", {"x": 1})] and parsed.content == "我来查。"


@pytest.mark.parametrize(
    "text",
    [
        'g\n{"x": 1}',  # not an offered name
        "f\nhello",  # an offered name, but no JSON arguments
        "f(x) is a function\n{",  # not a name alone on the first line
        "all",  # the word alone, no newline
        "总之\nall\n",  # 'all' not at the start
        '我来查。>>>f\n{"x": 1}',  # no Functionary start: '>>>' must begin a line
        "allowed\nyes",
    ],
)
def test_replies_that_only_look_like_a_functionary_start_are_text(text: str) -> None:
    calls, parsed = each_split(text)
    assert calls == [] and parsed.content == text


def test_reply_start_decides_from_a_bounded_prefix() -> None:
    allowed = frozenset({"f"})
    assert reply_start("al", False, allowed)[0] == "need"
    assert reply_start("Hello world", False, allowed)[0] == "fail"
    assert reply_start("f", False, allowed)[0] == "need"
    assert reply_start("f\n  ", False, allowed)[0] == "need"
    assert reply_start("x" * 100, False, allowed)[0] == "fail"
    assert reply_start(" to=functions.f", False, allowed)[0] == "need"
    assert reply_start(" to=functions.f<|channel|>", False, allowed)[:3:2] == (
        "harmony",
        "functions.f",
    )


def test_a_first_word_that_cannot_become_an_offered_name_is_not_held_back() -> None:
    """A streamed reply starting `Checking.` is shown at once (the console test of a native
    round found it held until the stream ended); only a prefix of an offered name waits."""
    allowed = frozenset({"weather", "web_search"})
    assert reply_start("Checking.", False, allowed)[0] == "fail"
    assert reply_start("Wea", False, allowed)[0] == "fail"
    assert reply_start("we", False, allowed)[0] == "need"
    assert reply_start("weather", False, allowed)[0] == "need"


def test_harmony_recipient_in_the_prompt_started_role_header() -> None:
    text = ' to=functions.f<|channel|>commentary <|constrain|>json<|message|>{"x": 1}'
    calls, parsed = each_split(text)
    assert calls == [("f", {"x": 1})] and parsed.content == ""
    # The same words later in a reply are not a header.
    calls, parsed = each_split("请写 to=functions.f<|channel|>")
    assert calls == [] and parsed.content.startswith("请写 to=functions.f")


def test_harmony_empty_header_addressed_to_the_assistant_is_markup() -> None:
    text = "<|channel|>commentary to=assistant<|channel|>final<|message|>你好"
    calls, parsed = each_split(text)
    assert calls == [] and parsed.content == "你好"


def test_seed_oss_layout_newlines_are_syntax_and_other_newlines_are_data() -> None:
    def seed(value: str) -> str:
        call = f"<function=f><parameter=x>{value}</parameter></function>"
        return f"<seed:tool_call>{call}</seed:tool_call>"

    assert each_split(seed("\n主程序.py\n"))[0] == [("f", {"x": "主程序.py"})]
    assert each_split(seed("a\n\n"))[0] == [("f", {"x": "a\n\n"})]
    assert each_split(seed("\n  a\n\n"))[0] == [("f", {"x": "  a\n"})]


def test_function_gemma_escaped_values_are_typed_only_by_a_schema() -> None:
    text = (
        "<start_function_call>call:f{x:<escape>10<escape>y:<escape>10<escape>}<end_function_call>"
    )
    schema = {"f": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    assert each_split(text, schemas=schema)[0] == [("f", {"x": 10, "y": "10"})]
    assert each_split(text)[0] == [("f", {"x": "10", "y": "10"})]


def test_minicpm_params_with_cdata_and_without() -> None:
    text = '<function name="f"><param name="x"><![CDATA[a</param>b]]></param></function>'
    assert each_split(text)[0] == [("f", {"x": "a</param>b"})]
    broken = '<function name="f"><param name="x">a</function>'
    calls, parsed = each_split(broken)
    assert calls == [] and parsed.content == broken


def test_json_fence_holding_the_asked_format_is_a_candidate_only_for_that_format() -> None:
    text = '```json\n<function_call>{"name": "f", "arguments": {"x": 1}}</function_call>\n```'
    assert each_split(text, fmt="function_call")[0] == [("f", {"x": 1})]
    assert each_split(text, fmt="hermes")[0] == []
    assert each_split(text)[0] == []
