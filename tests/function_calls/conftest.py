"""Fixtures for the function_calls tests: a fresh registry with a few functions, and what they
were called with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from tests.kit import hang as never_answers


class NoteArgs(BaseModel):
    text: str = Field(min_length=1, description="What to note")
    priority: int = Field(default=1, ge=1, le=5)


class CityArgs(BaseModel):
    city: str


class Calls:
    """What the test functions were called with (they run in the bot; tests read this)."""

    def __init__(self) -> None:
        self.notes: list[NoteArgs] = []
        self.admin_runs = 0
        self.weather: list[str] = []
        self.running = 0
        self.max_running = 0


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def registry(calls: Calls) -> Registry:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="note_add", description="Save a note for the user.")
        def note_add(ctx: MessageContext, args: NoteArgs) -> FunctionResult:
            calls.notes.append(args)
            return FunctionResult(messages=[f"Noted: {args.text} (p{args.priority})"])

        @tool_function(name="weather", description="Current weather in a city (data for you).")
        async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            calls.running += 1
            calls.max_running = max(calls.max_running, calls.running)
            await asyncio.sleep(0.05)
            calls.running -= 1
            calls.weather.append(args.city)
            return FunctionResult(llm_content=f"{args.city}: 21°C, sunny")

        @tool_function(name="shutdown", description="Shut the bot down.", admin_only=True)
        def shutdown(ctx: MessageContext) -> FunctionResult:
            calls.admin_runs += 1
            return FunctionResult(messages=["shutting down"])

        @tool_function(name="explode", description="Always fails.")
        def explode(ctx: MessageContext) -> FunctionResult:
            raise RuntimeError("kaboom")

        @tool_function(name="hang", description="Never finishes.", timeout=0.2)
        async def hang(ctx: MessageContext) -> FunctionResult:
            await never_answers()

        @tool_function(
            name="team_only", description="Group-only function.", scope="group", require_at=True
        )
        def team_only(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["team!"])

    return reg


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bot.db'}"
