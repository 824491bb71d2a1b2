"""welcome: a greeting on member_joined, per group, with a default, and off."""

from __future__ import annotations

from function_calls.context import SystemEvent
from tests.function_calls.builtins.conftest import MakeBot


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
