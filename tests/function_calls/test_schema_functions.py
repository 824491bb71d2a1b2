"""Functions declared by a JSON schema (what an MCP server's tools become): registration
checks, argument validation, slash-command parsing, and `is_error` results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatfn.testing import ScriptedModel, TestBot, call, say
from function_calls import FunctionDefinitionError, FunctionResult, schema_function
from function_calls.commands import parse_arguments

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


async def forecast(ctx: Any, arguments: dict[str, Any]) -> FunctionResult:
    if arguments["city"] == "Atlantis":
        return FunctionResult(llm_content="no such city", is_error=True)
    return FunctionResult(
        llm_content=f"sunny in {arguments['city']} for {arguments.get('days', 1)}"
    )


async def other(ctx: Any, arguments: dict[str, Any]) -> FunctionResult:
    return FunctionResult()


def test_registration_checks_name_description_and_schema() -> None:
    with pytest.raises(FunctionDefinitionError, match="must match"):
        schema_function("bad name", "d", SCHEMA, forecast)
    with pytest.raises(FunctionDefinitionError, match="needs a description"):
        schema_function("f", " ", SCHEMA, forecast)
    with pytest.raises(FunctionDefinitionError, match="invalid JSON schema"):
        schema_function("f", "d", {"type": "object", "properties": {"x": {"type": 5}}}, forecast)
    spec = schema_function("f", "d", {}, forecast)
    assert spec.parameters_schema == {"type": "object", "properties": {}}


def test_slash_command_fields_come_from_the_schema() -> None:
    spec = schema_function("forecast", "Weather.", SCHEMA, forecast)
    assert spec.usage == "Usage: /forecast city=… [days=…]  (or /forecast <city>)"
    assert parse_arguments(spec, "city=Oslo days=3") == {"city": "Oslo", "days": 3}
    assert parse_arguments(spec, "New York") == {"city": "New York"}


async def test_validation_and_error_results(tmp_path: Path) -> None:
    model = ScriptedModel(
        [call("forecast", city="Atlantis"), call("forecast", city="Oslo"), say("Sunny.")]
    )
    tb = TestBot(tmp_path, model=model, builtins=False)
    tb.bot.add_function(schema_function("forecast", "Weather.", SCHEMA, forecast))
    with pytest.raises(FunctionDefinitionError, match="duplicate"):
        tb.bot.add_function(schema_function("forecast", "Other.", SCHEMA, other))
    assert await tb.send("/forecast city=Oslo days=0") == [
        "Invalid arguments for forecast: days: 0 is less than the minimum of 1.\n"
        "Usage: /forecast city=… [days=…]  (or /forecast <city>)"
    ]
    assert await tb.send("/forecast Atlantis") == ["no such city"]
    assert await tb.send("/forecast Oslo") == ["sunny in Oslo for 1"]
    assert await tb.send("weather?") == ["Sunny."]
    first_result = model.requests[1].messages[-1]
    assert first_result.is_error and first_result.content == "forecast failed: no such city"
    assert not model.requests[2].messages[-1].is_error
    outcomes = [r.outcome for r in tb.bot.storage.tool_calls()]
    assert outcomes == ["invalid", "error", "ok", "error", "ok"]
    tb.bot.remove_function("forecast")
    assert await tb.send("/forecast Oslo") == [
        "Unknown command /forecast. Send /help to see what you can use."
    ]
    await tb.aclose()
