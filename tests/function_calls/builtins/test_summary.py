"""summary: bounded prompt, time windows, extract on model failure, refused windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from function_calls.builtins.summary.settings import SummarySettings
from function_calls.builtins.summary.transcript import SpanError, parse_span
from providers.errors import ProviderUnavailable
from providers.scripted import ScriptedModel, say
from tests.function_calls.builtins.conftest import MakeBot

GROUP = "team1"
UTC_ZONE = ZoneInfo("UTC")
NOW = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)  # a Sunday


async def chat(tb, n: int, *, text: str = "message {i} about the release") -> None:
    for i in range(n):
        tb.bot.storage.add_message(
            platform="test",
            chat_id=GROUP,
            role="user",
            sender_id=f"u{i % 3}",
            sender_name=f"user{i % 3}",
            text=text.format(i=i),
            is_group=True,
        )


async def test_summary_uses_the_model_within_the_prompt_bound(make_bot: MakeBot) -> None:
    model = ScriptedModel([say("• The release moves to Friday.")])
    cfg = {"summary": {"max_prompt_chars": 1000, "max_message_chars": 60}}
    tb, _ = await make_bot(model=model, config=cfg)
    await chat(tb, 40, text="message {i} " + "x" * 200)
    [reply] = await tb.send("/summary 30", sender="bob", group=GROUP)
    assert reply.startswith("Summary of the last 30 messages, 30 messages (only the newest ")
    assert reply.endswith("• The release moves to Friday.")
    prompt = model.requests[0].messages[-1].content
    transcript = prompt.split("\n\n", 1)[1]
    assert len(transcript) <= 1000
    assert "message 39 " in transcript and "message 10 " not in transcript
    assert all(len(line) < 100 for line in transcript.splitlines())
    assert model.requests[0].tools == []


async def test_time_window_and_nothing_to_say(make_bot: MakeBot) -> None:
    model = ScriptedModel([say("• recent stuff")])
    tb, _ = await make_bot(model=model)
    old = datetime.now(UTC) - timedelta(hours=3)
    tb.bot.storage.add_message(
        platform="test",
        chat_id=GROUP,
        role="user",
        sender_id="a",
        text="ancient history",
        is_group=True,
        created_at=old,
    )
    await chat(tb, 2)
    [reply] = await tb.send("/summary 1h", sender="bob", group=GROUP)
    assert reply.startswith("Summary of the last 1h, 2 messages:")
    prompt = model.requests[0].messages[-1].content
    assert "message 1 about" in prompt and "ancient history" not in prompt
    assert "/summary" not in prompt  # the request itself is not part of it
    [empty] = await tb.send("/summary 5m", sender="bob", group="quiet-group")
    assert empty == "Nothing to summarise in the last 5m."
    [bad] = await tb.send("/summary fortnight", sender="bob", group=GROUP)
    assert bad.startswith("Not summarised: cannot read 'fortnight'")


async def test_model_failure_gives_an_extract(make_bot: MakeBot) -> None:
    model = ScriptedModel([ProviderUnavailable("down", provider="scripted")])
    tb, _ = await make_bot(model=model)
    await chat(tb, 12)
    [reply] = await tb.send("/summary", sender="bob", group=GROUP)
    lines = reply.splitlines()
    assert lines[0] == (
        "I could not summarise the last 50 messages (the model is not "
        "available); the last messages were:"
    )
    assert lines[1:] == [f"• user{i % 3}: message {i} about the release" for i in range(4, 12)]


async def test_summary_is_for_groups_only(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    [reply] = await tb.send("/summary", sender="bob")
    assert reply == "summary only works in group chats."


def test_huge_summary_window_is_refused_not_a_crash() -> None:
    with pytest.raises(SpanError):
        parse_span("99999999999999d", SummarySettings(), NOW, UTC_ZONE)


def test_summary_window_reads_the_same_units_as_reminders() -> None:
    """`last 2 weeks` and `90s` use the reminders' unit words (one shared table)."""
    weeks = parse_span("last 2 weeks", SummarySettings(), NOW, UTC_ZONE)
    assert weeks.since == NOW - timedelta(weeks=2)
    seconds = parse_span("90s", SummarySettings(), NOW, UTC_ZONE)
    assert seconds.since == NOW - timedelta(seconds=90)
    with pytest.raises(SpanError) as err:
        parse_span("2 fortnights", SummarySettings(), NOW, UTC_ZONE)
    assert err.value.key == "summary.err.unit"
