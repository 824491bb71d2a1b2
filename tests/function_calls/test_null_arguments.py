"""A null the model sends for a field whose default is None means "not given".

Non-strict providers are shown such a field in its optional form (no null in its type:
`providers.schema.nulls_meaning_absent`); a model that sends null anyway must get what the
full schema promised: the default, exactly as if it had left the field out. A field whose
default is not None keeps refusing null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from chatfn.testing import ScriptedModel, TestBot, call, say
from function_calls import FunctionResult, MessageContext, schema_function, tool_function
from function_calls.registry import SPEC_ATTR

SEEN: list[Any] = []


class NoteArgs(BaseModel):
    text: str = Field(min_length=1)
    tag: str | None = None
    priority: int = 1


@tool_function(name="note", description="Take a note.")
async def note(ctx: MessageContext, args: NoteArgs) -> FunctionResult:
    SEEN.append((args.model_dump(), sorted(args.model_fields_set)))
    return FunctionResult(llm_content="noted")


async def test_null_for_a_none_default_is_the_same_as_absent(tmp_path: Path) -> None:
    SEEN.clear()
    model = ScriptedModel(
        [
            call("note", text="milk", tag=None),
            call("note", text="milk"),
            call("note", text="milk", priority=None),
            say("Done."),
        ]
    )
    tb = TestBot(tmp_path, model=model, builtins=False)
    tb.bot.add_function(getattr(note, SPEC_ATTR))
    assert await tb.send("note milk") == ["Done."]
    # The explicit null and the omission reach the function identically, fields-set included.
    assert SEEN == [
        ({"text": "milk", "tag": None, "priority": 1}, ["text"]),
        ({"text": "milk", "tag": None, "priority": 1}, ["text"]),
    ]
    # priority's default is 1, not None: null stays an error the model is told about.
    error = [m for m in model.requests[3].messages if m.role == "tool"][-1]
    assert error.is_error and "priority" in error.content
    await tb.aclose()


async def test_schema_function_gets_the_null_dropped(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []

    async def forecast(ctx: Any, arguments: dict[str, Any]) -> FunctionResult:
        received.append(arguments)
        return FunctionResult(llm_content="sunny")

    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "note": {"type": ["string", "null"]},  # no default: null is a value here
        },
        "required": ["city"],
    }
    model = ScriptedModel([call("forecast", city="Oslo", unit=None, note=None), say("Sunny.")])
    tb = TestBot(tmp_path, model=model, builtins=False)
    tb.bot.add_function(schema_function("forecast", "Weather.", schema, forecast))
    assert await tb.send("weather?") == ["Sunny."]
    assert received == [{"city": "Oslo", "note": None}]
    await tb.aclose()
