"""summary (bounded prompt, time windows, extract on model failure), welcome on member_joined,
and the per-feature status check_system.py shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from function_calls.builtins.reminders import ReminderService
from function_calls.builtins.web_search import WebSearchClient
from function_calls.context import SystemEvent
from providers.errors import ProviderUnavailable
from providers.scripted import ScriptedModel, say
from runtime.plugins import builtin_status
from runtime.settings import parse_settings
from tests.builtins.conftest import MakeBot

GROUP = "team1"


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


async def test_welcome_per_group_default_and_off(make_bot: MakeBot) -> None:
    cfg = {"welcome": {"messages": {"g1": "Hi {name}, read the rules."}}}
    tb, outbox = await make_bot(config=cfg)
    event = SystemEvent(
        kind="member_joined", platform="test", chat_id="g1", user_id="d7", user_name="Dana"
    )
    [sent] = await tb.bot.handle_event(event)
    assert (sent.text, sent.at, sent.chat_id) == ("Hi Dana, read the rules.", "d7", "g1")
    assert outbox.texts == ["Hi Dana, read the rules."]
    other = SystemEvent(kind="member_joined", platform="test", chat_id="g2", user_id="e")
    assert [m.text for m in await tb.bot.handle_event(other)] == [
        "Welcome! Send /help to see what I can do."
    ]
    off, _ = await make_bot(config={"welcome": {"enabled": False}})
    assert await off.bot.handle_event(event) == []


def test_status_rows() -> None:
    rows = {r[0]: r[1:] for r in builtin_status(parse_settings({}))}
    assert rows["reminders"][0] == "on" and rows["summary"][0] == "on"
    assert rows["welcome"][0] == "on" and rows["web_search"][0] == "missing key"
    assert rows["help"] == ("on", "always available")
    rows = {
        r[0]: r[1:]
        for r in builtin_status(
            parse_settings(
                {
                    "reminders": {"enabled": False},
                    "web_search": {"api_key": "k" * 8},
                    "function_calls": {"disabled": ["summary"]},
                }
            )
        )
    }
    assert rows["reminders"] == ("off", "reminders.enabled is false")
    assert (
        rows["web_search"][0] == "on"
        and "sonar at https://api.perplexity.ai" in rows["web_search"][1]
    )
    assert rows["summary"] == ("off", "listed in function_calls.disabled")


async def test_each_builtin_switches_off(make_bot: MakeBot) -> None:
    cfg = {
        "reminders": {"enabled": False},
        "summary": {"enabled": False},
        "web_search": {"enabled": False, "api_key": "k" * 8},
        "welcome": {"enabled": False},
    }
    tb, _ = await make_bot(config=cfg)
    assert [s.name for s in tb.bot.registry.all()] == ["help"]
    assert tb.bot.service(ReminderService) is None and tb.bot.service(WebSearchClient) is None
