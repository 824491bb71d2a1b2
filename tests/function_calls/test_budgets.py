"""Money: `models.NAME.price` puts a cost on every usage row, `cost_per_day` limits count it,
and `limits.on_exceed: {downgrade_to: MODEL}` keeps a chat over its budget talking on the
cheaper model (told once a day) until that model's own budget is spent too; then the chat is
refused. Through the whole bot on a real SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chatfn.testing import TestBot
from function_calls import limits
from providers.scripted import ScriptedModel, say

NOON = datetime(2030, 1, 1, 12, 0, 10, tzinfo=UTC)
# ScriptedModel reports 10 prompt + 5 completion tokens per request.
MAIN_PRICE = {"input": 4000, "output": 8000}  # 0.08 a request
CHEAP_PRICE = {"input": 1000, "output": 3000, "cached_input": 500}  # 0.025 a request


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    now = [NOON]
    monkeypatch.setattr(limits, "clock", lambda: now[0])
    return now


def _entry(price: dict[str, float]) -> dict[str, Any]:
    return {"provider": "openai", "model": "x", "api_key": "k", "price": price}


def _bot(tmp_path: Path, on_exceed: Any, chats: list[Any] | None = None) -> tuple[TestBot, Any]:
    main = ScriptedModel([say("from main")], name="main", repeat_last=True)
    cheap = ScriptedModel([say("from cheap")], name="cheap", repeat_last=True)
    config = {
        "models": {"main": _entry(MAIN_PRICE), "cheap": _entry(CHEAP_PRICE)},
        "bot": {"model": "main", "admins": ["boss"], "timezone": "UTC"},
        "limits": {"per_chat": {"cost_per_day": 0.05}, "on_exceed": on_exceed},
        "chats": chats or [],
    }
    return TestBot(tmp_path, model=main, models={"cheap": cheap}, config=config), (main, cheap)


async def test_a_cost_cap_downgrades_then_refuses(tmp_path: Path, pinned_clock) -> None:
    tb, (main, cheap) = _bot(tmp_path, {"downgrade_to": "cheap"})
    assert await tb.send("one") == ["from main"]  # 0.08: over the 0.05 cap from now on
    second = await tb.send("two")
    assert len(second) == 2 and second[1] == "from cheap"
    assert "0.05 cost per day" in second[0] and "answering with cheap" in second[0]
    assert await tb.send("three") == ["from cheap"]  # told once a day, not every message
    # cheap's own spend: 0.05 now, its budget too: refused, and told once.
    refused = await tb.send("four")
    assert len(refused) == 1 and "0.05 cost per day" in refused[0] and "resets" in refused[0]
    assert await tb.send("five") == []
    assert (len(main.requests), len(cheap.requests)) == (1, 2)

    rows = tb.bot.storage.chat_state.usage_rows()
    assert [(r.model_name, round(r.cost, 6)) for r in rows] == [
        ("main", 0.08),
        ("cheap", 0.025),
        ("cheap", 0.025),
    ]
    settings = (await tb.send("/settings", admin=True))[0]
    assert "on_exceed: downgrade_to cheap (limits.on_exceed)" in settings
    assert "spent today: 30 tokens" not in settings  # tokens are not limited: not counted
    assert "cost 0.1300" in settings and "answering with cheap" in settings
    stats = (await tb.send("/stats", admin=True))[0]
    assert "cost 0.1300" in stats and "cheap 2 calls" in stats

    pinned_clock[0] = NOON.replace(day=2)  # a new day: the chat is back on its own model
    assert await tb.send("six") == ["from main"]
    await tb.aclose()


async def test_refuse_keeps_todays_behaviour_and_a_chats_rule_may_downgrade(
    tmp_path: Path,
) -> None:
    rule = [{"match": {"is_group": True}, "on_exceed": {"downgrade_to": "cheap"}}]
    tb, (main, cheap) = _bot(tmp_path, "refuse", rule)
    assert await tb.send("one") == ["from main"]
    refused = await tb.send("two")
    assert len(refused) == 1 and "0.05 cost per day" in refused[0]
    assert len(cheap.requests) == 0
    # A group matched by the rule has its own chat budget, and downgrades over it.
    assert await tb.send("a", group="group:1", at_bot=True) == ["from main"]
    over = await tb.send("b", group="group:1", at_bot=True)
    assert over[-1] == "from cheap" and "answering with cheap" in over[0]
    await tb.aclose()


async def test_a_downgrade_to_an_unknown_model_stops_the_bot(tmp_path: Path) -> None:
    from chatfn.runtime.settings import ConfigError

    with pytest.raises(ConfigError, match=r"limits.on_exceed.downgrade_to: no model named"):
        TestBot(
            tmp_path,
            model=ScriptedModel([], name="main"),
            config={"limits": {"on_exceed": {"downgrade_to": "gone"}}},
        )
