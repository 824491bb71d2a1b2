"""Compaction through the whole bot on a real SQLite file: when the history stops fitting the
model's `context_tokens`, the oldest turns (a function call and its result among them) are
summarised by `bot.summary_model` once, the summary is stored, every later request shows it at
the same place, and requests keep their byte prefix between compactions. `/settings` shows it;
`/reset` clears it; the summary request is accounted like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chatfn.testing import TestBot
from function_calls.compaction import SUMMARISE
from providers.scripted import ScriptedModel, call, say
from providers.types import LLMResponse, Message, ModelCapabilities, ToolDefinition
from tests.runtime.functions import make_registry

T0 = 1_800_000_000.0
PADDING = "x" * 570  # a question of ~600 bytes: ~200 tokens by the bot's estimate
SUMMARY_HEAD = SUMMARISE.split(".")[0]


def _is_summary_request(messages: list[Message]) -> bool:
    return (messages[0].content or "").startswith(SUMMARY_HEAD)


def _chat(messages: list[Message], tools: list[ToolDefinition]) -> LLMResponse:
    """The chat model: calls `weather` when asked about it, otherwise answers briefly."""
    assert not _is_summary_request(messages), "summaries go to bot.summary_model"
    last = messages[-1]
    if last.role == "tool":
        return say("It is sunny in Oslo.")
    if "weather" in (last.content or "") and tools:
        return call("weather", city="Oslo")
    return say(f"answer {sum(1 for m in messages if m.role == 'user')}")


def _bot(tmp_path: Path, clock: list[float]) -> tuple[TestBot, ScriptedModel, ScriptedModel]:
    caps = ModelCapabilities(streaming=False, context_tokens=3000)
    main = ScriptedModel([_chat], name="main", capabilities=caps, repeat_last=True)
    summaries: list[str] = []

    def summarise(messages: list[Message], _tools: list[ToolDefinition]) -> LLMResponse:
        summaries.append(messages[1].content or "")
        return say(f"SUMMARY {len(summaries)}: Alice asked about Oslo's weather (sunny).")

    cheap = ScriptedModel([summarise], name="cheap", repeat_last=True)
    entry: dict[str, Any] = {"provider": "openai", "model": "x", "api_key": "k"}
    config = {
        "models": {"main": entry, "cheap": entry},
        "bot": {"model": "main", "summary_model": "cheap", "history_size": 200},
    }
    tb = TestBot(
        tmp_path,
        model=main,
        models={"cheap": cheap},
        config=config,
        registry=make_registry([]),
        builtins=False,
        clock=lambda: clock[0],
    )
    return tb, main, cheap


async def test_compaction_at_the_boundary_stores_one_summary_and_keeps_the_prefix(
    tmp_path: Path,
) -> None:
    clock = [T0]
    tb, main, cheap = _bot(tmp_path, clock)
    state = tb.bot.storage.chat_state
    assert await tb.send("What is the weather in Oslo?") == ["It is sunny in Oslo."]
    turn = 1
    while not cheap.requests:  # talk until the history overflows the window
        turn += 1
        assert turn < 20, "the history never overflowed"
        clock[0] += 60
        [answer] = await tb.send(f"question {turn} {PADDING}")
        assert answer.startswith("answer ")
    compacted_at = turn
    # Before the boundary every request held the whole conversation, first question included.
    chat_requests = [r.messages for r in main.requests]
    before = chat_requests[:compacted_at]  # turn 1 made two requests (the call, the answer)
    assert all("weather in Oslo" in (m[1].content or "") for m in before)
    # The summary request: the turns that no longer fit, with the function call and its result.
    [transcript] = [r.messages[1].content or "" for r in cheap.requests]
    assert "What is the weather in Oslo?" in transcript
    assert "[function weather(" in transcript and "Oslo: 21°C, sunny" in transcript
    stored = state.summary("test", "private:alice")
    assert stored is not None and stored.text.startswith("SUMMARY 1")
    # The request of the compaction turn: the summary at the end of the system prompt, the
    # kept turns after it, the oldest turns gone.
    after = chat_requests[compacted_at]
    assert after[0].content and after[0].content.endswith(stored.text)
    assert "Summary of the earlier conversation" in after[0].content
    assert all("weather in Oslo" not in (m.content or "") for m in after[1:])

    for more in range(3):  # the next turns: no new summary, the same prefix
        clock[0] += 60
        await tb.send(f"follow-up {more} {PADDING[:200]}")
    assert len(cheap.requests) == 1  # once per compaction, not per turn
    assert state.summary("test", "private:alice") == stored
    following = [r.messages for r in main.requests][compacted_at:]
    for previous, nxt in zip(following, following[1:], strict=False):
        # Each request starts with everything the previous one sent, up to its newest message.
        assert nxt[: len(previous) - 1] == previous[:-1]

    # Accounted: the summary request has its usage row, under the model that made it.
    rows = state.usage_rows()
    assert [r.model_name for r in rows].count("cheap") == 1
    await tb.aclose()


async def test_settings_shows_the_summary_and_reset_clears_it(tmp_path: Path) -> None:
    clock = [T0]
    tb, main, cheap = _bot(tmp_path, clock)
    from function_calls.builtins.chat_admin import functions as admin

    tb.bot.registry.include(admin)
    await tb.send("What is the weather in Oslo?")
    turn = 1
    while not cheap.requests:
        turn += 1
        clock[0] += 60
        await tb.send(f"question {turn} {PADDING}")
    settings = (await tb.send("/settings", admin=True))[0]
    assert "history summary: ~" in settings and "made 20" in settings and "by cheap" in settings
    await tb.send("/reset", admin=True)
    assert tb.bot.storage.chat_state.summary("test", "private:alice") is None
    await tb.send("a fresh start")
    assert "Summary of the earlier" not in (main.requests[-1].messages[0].content or "")
    assert "history summary" not in (await tb.send("/settings", admin=True))[0]
    await tb.aclose()
