"""Slash-command parsing."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from function_calls.commands import CommandSyntaxError, parse_arguments, split_command, usage
from function_calls.registry import build_spec
from function_calls.spec import FunctionResult


class Two(BaseModel):
    text: str
    count: int = 1


class OneInt(BaseModel):
    n: int


def spec_for(model: type[BaseModel] | None):  # type: ignore[no-untyped-def]
    if model is None:

        def h(ctx):  # type: ignore[no-untyped-def]
            return FunctionResult()
    else:

        def h(ctx, args: model):  # type: ignore[no-untyped-def,valid-type]
            return FunctionResult()

    h.__annotations__ = {"args": model} if model else {}
    return build_spec(h, name="cmd", description="d")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("/help", ("help", "")),
        ("  /note_add buy milk ", ("note_add", "buy milk")),
        ("/a-b_1 x=1", ("a-b_1", "x=1")),
        ("/note\nline two", ("note", "line two")),
    ],
)
def test_split_command(text: str, expected: tuple[str, str]) -> None:
    parsed = split_command(text)
    assert parsed is not None and (parsed.name, parsed.rest) == expected


@pytest.mark.parametrize("text", ["hello", "/", "/ spaced", "path /usr/bin", "//x"])
def test_not_commands(text: str) -> None:
    assert split_command(text) is None


def test_key_values_json_values_and_quotes() -> None:
    spec = spec_for(Two)
    assert parse_arguments(spec, 'text="buy milk" count=3') == {"text": "buy milk", "count": 3}
    assert parse_arguments(spec, "count=2 text=x") == {"count": 2, "text": "x"}


def test_free_text_fills_the_single_string_field() -> None:
    spec = spec_for(Two)
    assert parse_arguments(spec, "don't forget the milk") == {"text": "don't forget the milk"}
    # key=value with an unknown key is free text, not a silent drop.
    assert parse_arguments(spec, "ratio=1:2 is fine") == {"text": "ratio=1:2 is fine"}


def test_json_object() -> None:
    assert parse_arguments(spec_for(Two), '{"text": "a", "count": 2}') == {"text": "a", "count": 2}
    with pytest.raises(CommandSyntaxError, match="invalid"):
        parse_arguments(spec_for(Two), '{"text": ')


def test_free_text_without_a_string_field_gets_usage() -> None:
    with pytest.raises(CommandSyntaxError, match=r"Usage: /cmd n=…"):
        parse_arguments(spec_for(OneInt), "five")
    assert usage(spec_for(None)) == "Usage: /cmd"
