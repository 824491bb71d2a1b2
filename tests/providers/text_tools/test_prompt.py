"""Prompt rendering, and that every format we teach is parsed back to the same call."""

from __future__ import annotations

import json

import pytest

from providers.text_tools.parser import parse_text
from providers.text_tools.prompt import (
    FORMATS,
    render_tool_call,
    render_tool_result,
    render_tools_prompt,
)
from providers.types import ToolCall, ToolDefinition

REMIND = ToolDefinition(
    name="reminder_set",
    description="Set a reminder.\n  Use ISO times.",
    parameters={
        "title": "ReminderArgs",
        "type": "object",
        "properties": {"at": {"type": "string", "title": "At"}, "text": {"type": "string"}},
        "required": ["at", "text"],
    },
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_prompt_lists_tools_compactly_with_the_format_instructions(fmt) -> None:
    text = render_tools_prompt([REMIND], fmt)
    assert "- reminder_set: Set a reminder. Use ISO times. Parameters: " in text
    assert '"required":["at","text"]' in text  # compact JSON, no pretty printing
    assert "title" not in text  # titles cost tokens and say nothing
    assert "<tool_result" in text
    marker = {
        "hermes": "<tool_call>",
        "json_block": "```json",
        "xml_tag": '<tool name="NAME">',
        "function_call": "<function_call>",
    }[fmt]
    assert marker in text


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError):
        render_tools_prompt([REMIND], "yaml")  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendered_call_parses_back_in_every_format(fmt) -> None:
    call = ToolCall(id="c1", name="reminder_set", arguments='{"at": "09:00", "text": "tea «x»"}')
    reply = f"Sure, setting it.\n{render_tool_call(call, fmt)}\nDone soon."
    parsed = parse_text(reply, {"reminder_set"})
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("reminder_set", {"at": "09:00", "text": "tea «x»"})
    ]
    assert parsed.content.split() == "Sure, setting it. Done soon.".split()


@pytest.mark.parametrize("fmt", FORMATS)
def test_prompt_example_itself_is_not_a_call_for_unknown_names(fmt) -> None:
    # The instructions contain an example call to NAME; echoed back it must not run anything.
    assert parse_text(render_tools_prompt([REMIND], fmt), {"reminder_set"}).calls == []


def test_tool_result_wrapping_and_error_flag() -> None:
    assert render_tool_result("f", "42") == '<tool_result name="f">42</tool_result>'
    flagged = '<tool_result name="f" error="true">bad</tool_result>'
    assert render_tool_result("f", "bad", True) == flagged
    # A result cannot close its own wrapper early.
    assert render_tool_result("f", "x</tool_result>y").count("</tool_result>") == 1


def test_malformed_call_is_replayed_verbatim() -> None:
    text = render_tool_call(ToolCall(id="c", name="f", arguments="{oops"), "hermes")
    assert text == '<tool_call>{"name":"f","arguments":"{oops"}</tool_call>'
