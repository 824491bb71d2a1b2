"""Limits through the whole bot on a real SQLite file: exact under concurrency, counted in the
database (a restart resets nothing), one notice per window, slash commands not counted,
admins exempt."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chatfn.testing import TestBot
from function_calls import limits
from providers.scripted import ScriptedModel, say

NOON = datetime(2030, 1, 1, 12, 0, 10, tzinfo=UTC)


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    now = [NOON]
    monkeypatch.setattr(limits, "clock", lambda: now[0])
    return now


def _bot(tmp_path: Path, model: ScriptedModel, per_user: Any = None, **more: Any) -> TestBot:
    config = {
        "bot": {"admins": ["boss"], "timezone": "UTC"},
        "limits": {"per_user": per_user or {}, **more},
    }
    return TestBot(tmp_path, model=model, config=config)


async def test_fifty_concurrent_messages_make_exactly_six_model_turns(tmp_path: Path) -> None:
    model = ScriptedModel([say("ok")], repeat_last=True)
    tb = _bot(tmp_path, model, {"messages_per_minute": 6})
    # One user, fifty chats at once: per-chat ordering does not serialise them.
    replies = await asyncio.gather(
        *(tb.send(f"hi {i}", group=f"group:{i}", at_bot=True) for i in range(50))
    )
    assert len(model.requests) == 6
    answered = [r for r in replies if r == ["ok"]]
    notices = [r for r in replies if r and r != ["ok"]]
    assert len(answered) == 6
    assert len(notices) == 1  # told once in this minute, not 44 times
    assert "6 messages per minute" in notices[0][0] and "12:01" in notices[0][0]
    assert sum(1 for r in replies if r == []) == 43
    await tb.aclose()


async def test_the_window_resets_and_counts_survive_a_restart(
    tmp_path: Path, pinned_clock: list[datetime]
) -> None:
    model = ScriptedModel([say("ok")], repeat_last=True)
    tb = _bot(tmp_path, model, {"model_calls_per_day": 2})
    assert await tb.send("one") == ["ok"]
    await tb.aclose()
    tb = _bot(tmp_path, model, {"model_calls_per_day": 2})  # same database: a restart
    assert await tb.send("two") == ["ok"]
    refused = await tb.send("three")
    assert "2 model calls per day" in refused[0] and "tomorrow" in refused[0]
    assert await tb.send("four") == []  # already told today
    assert await tb.send("/help") != []  # a slash command calls no model: not limited
    assert len(model.requests) == 2
    pinned_clock[0] = NOON.replace(day=2)
    assert await tb.send("next day") == ["ok"]
    await tb.aclose()


async def test_tokens_per_day_use_the_reported_usage(tmp_path: Path) -> None:
    model = ScriptedModel([say("ok")], repeat_last=True)  # 10 prompt + 5 completion tokens
    tb = _bot(tmp_path, model, {"tokens_per_day": 30})
    assert await tb.send("a") == ["ok"]
    assert await tb.send("b") == ["ok"]  # 30 tokens used now
    assert "30 tokens per day" in (await tb.send("c"))[0]
    assert await tb.send("d", sender="bob") == ["ok"]  # per user: bob has his own
    await tb.aclose()


async def test_per_chat_limit_and_admins_exempt(tmp_path: Path) -> None:
    model = ScriptedModel([say("ok")], repeat_last=True)
    tb = _bot(tmp_path, model, per_chat={"model_calls_per_day": 2})
    assert await tb.send("a", group="group:g", at_bot=True) == ["ok"]
    assert await tb.send("b", sender="bob", group="group:g", at_bot=True) == ["ok"]
    refused = await tb.send("c", sender="carol", group="group:g", at_bot=True)
    assert refused[0].startswith("This chat has reached the limit of 2 model calls per day")
    assert await tb.send("d", sender="boss", group="group:g", at_bot=True) == ["ok"]
    assert await tb.send("e", sender="carol", group="group:other", at_bot=True) == ["ok"]
    await tb.aclose()


async def test_a_tool_loop_counts_every_model_call(tmp_path: Path) -> None:
    from providers.scripted import call
    from tests.runtime.functions import make_registry

    model = ScriptedModel([call("weather", city="Oslo"), say("Sunny"), say("x")])
    config = {"limits": {"per_user": {"model_calls_per_day": 2}}}
    tb = TestBot(tmp_path, model=model, config=config, registry=make_registry([]), builtins=False)
    assert await tb.send("weather in Oslo?") == ["Sunny"]
    # The two requests of that turn used the day's budget.
    assert "2 model calls per day" in (await tb.send("again"))[0]
    await tb.aclose()
