"""The functions the integration conversations call: one that returns data for the model and
one whose arguments the model gets wrong first (a datetime it writes as "tomorrow morning")."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult


class CityArgs(BaseModel):
    city: str = Field(description="City name")


class ReminderArgs(BaseModel):
    when: datetime = Field(description="ISO 8601 date and time")
    text: str = Field(min_length=1, description="What to remind of")


def make_registry(log: list[str] | None = None) -> Registry:
    """A registry with `weather` and `reminder_set`; `log` records the calls that ran."""
    ran = log if log is not None else []
    reg = Registry()
    with reg.collecting():

        @tool_function(name="weather", description="Current weather in a city (data for you).")
        def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            ran.append(f"weather {args.city}")
            return FunctionResult(llm_content=f"{args.city}: 21°C, sunny")

        @tool_function(name="reminder_set", description="Set a reminder (data for you).")
        def reminder_set(ctx: MessageContext, args: ReminderArgs) -> FunctionResult:
            ran.append(f"reminder {args.when:%Y-%m-%d %H:%M} {args.text}")
            return FunctionResult(llm_content=f"reminder set for {args.when:%Y-%m-%d %H:%M}")

        @tool_function(name="note_add", description="Save a note (tells the user itself).")
        def note_add(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            ran.append(f"note {args.city}")
            return FunctionResult(messages=[f"Noted: {args.city}"])

    return reg
