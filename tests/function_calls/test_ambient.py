"""Ambient context (issue 40 §4, function_calls/conversation.py): a group's unaddressed messages
reach the model when it is addressed, as a marked block of background chatter in the newest
message (each line's time and speaker), bounded by the chat's `ambient` count and tokens,
switched off per chat; the system prompt and the conversation before it stay byte for byte what
the previous request sent (the cached prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chatfn.testing import ScriptedModel, TestBot, say
from providers.types import Message

GROUP = "group:lounge"


def _bot(tmp_path: Path, rule: dict[str, Any] | None = None, **bot: Any) -> TestBot:
    config: dict[str, Any] = {"bot": bot} if bot else {}
    if rule is not None:
        config["chats"] = [{"match": {"chat_id": GROUP}, **rule}]
    model = ScriptedModel([say("my two cents")], repeat_last=True)
    return TestBot(tmp_path, model=model, config=config)


def _requests(tb: TestBot) -> list[list[Message]]:
    model = tb.bot.model
    assert isinstance(model, ScriptedModel)
    return [r.messages for r in model.requests]


async def test_chatter_is_background_in_the_newest_message_and_the_prefix_holds(
    tmp_path: Path,
) -> None:
    tb = _bot(tmp_path)
    try:
        await tb.send("tabs are better", group=GROUP, sender="ann")
        await tb.send("spaces, obviously", group=GROUP, sender="bob")
        assert await tb.send("what do you think?", group=GROUP, sender="ann", at_bot=True) == [
            "my two cents"
        ]
        await tb.send("see, the bot agrees", group=GROUP, sender="bob")
        await tb.send("/help", group=GROUP, sender="cy")  # a command addresses the bot
        await tb.send("and now?", group=GROUP, sender="bob", at_bot=True)
        first, second = _requests(tb)
        # the first: the system prompt and the newest message carrying the chatter
        assert [m.role for m in first] == ["system", "user"]
        newest = first[-1].content or ""
        assert newest.startswith("<context>Current time:")
        block = newest[newest.index("<background>") : newest.index("</background>")]
        lines = block.splitlines()[1:]
        assert [line.split("] ", 1)[1] for line in lines] == [
            "ann: tabs are better",
            "bob: spaces, obviously",
        ]
        assert all(line.startswith("[") and line[3] == ":" for line in lines)  # [HH:MM]
        assert newest.endswith("</background>\nann: what do you think?")
        # the second: the first request's system prompt, then the conversation (the question
        # as stored, the answer), then the newest message with the chatter since
        assert second[0] == first[0]
        assert [(m.role, m.content) for m in second[1:3]] == [
            ("user", "ann: what do you think?"),
            ("assistant", "my two cents"),
        ]
        newest = second[-1].content or ""
        assert "bob: see, the bot agrees" in newest and "ann: tabs are better" in newest
        assert "cy: /help" not in newest  # the command is part of the conversation
        assert newest.endswith("</background>\nbob: and now?")
        assert not any("<background>" in (m.content or "") for m in second[:-1])
    finally:
        await tb.aclose()


async def test_the_count_and_the_token_budget_keep_the_newest(tmp_path: Path) -> None:
    tb = _bot(tmp_path, {"ambient": {"messages": 2}})
    try:
        for i in range(5):
            await tb.send(f"remark {i}", group=GROUP, sender="ann")
        await tb.send("sum up", group=GROUP, sender="bob", at_bot=True)
        newest = _requests(tb)[-1][-1].content or ""
        assert "remark 2" not in newest and "remark 3" in newest and "remark 4" in newest
    finally:
        await tb.aclose()
    tb = _bot(tmp_path / "tokens", {"ambient": {"tokens": 80}})
    try:
        await tb.send("an old remark " * 5, group=GROUP, sender="ann")
        await tb.send("a long remark " * 40, group=GROUP, sender="ann")  # ~190 tokens
        await tb.send("sum up", group=GROUP, sender="bob", at_bot=True)
        newest = _requests(tb)[-1][-1].content or ""
        # one line over the budget: its start, marked as cut; the older one left out
        assert "a long remark" in newest and newest.count("a long remark") < 40
        assert " [...]\n</background>" in newest and "an old remark" not in newest
    finally:
        await tb.aclose()


async def test_off_per_chat_hides_the_chatter_and_settings_say_so(tmp_path: Path) -> None:
    tb = _bot(tmp_path, {"ambient": {"enabled": False}})
    try:
        await tb.send("secret plans", group=GROUP, sender="ann")
        await tb.send("hello", group=GROUP, sender="bob", at_bot=True)
        request = _requests(tb)[-1]
        assert not any("secret plans" in (m.content or "") for m in request)
        assert [m.role for m in request] == ["system", "user"]
        [shown] = await tb.send("/settings", group=GROUP, sender="root", admin=True)
        assert "• ambient: off (chats[0])" in shown
        [shown] = await tb.send("/settings", group="group:other", sender="root", admin=True)
        assert "• ambient: on, 20 messages, 1000 tokens (default)" in shown
    finally:
        await tb.aclose()


async def test_groups_answering_every_message_have_no_chatter(tmp_path: Path) -> None:
    tb = _bot(tmp_path, respond_in_groups="always")
    try:
        await tb.send("first", group=GROUP, sender="ann")
        await tb.send("second", group=GROUP, sender="bob")
        request = _requests(tb)[-1]
        assert [(m.role, m.content) for m in request[1:3]] == [
            ("user", "ann: first"),
            ("assistant", "my two cents"),
        ]
        assert "<background>" not in (request[-1].content or "")
    finally:
        await tb.aclose()


async def test_a_chat_admin_switches_it_with_ambient(tmp_path: Path) -> None:
    tb = _bot(tmp_path)
    try:
        [shown] = await tb.send("/ambient", group=GROUP, sender="root", admin=True)
        assert "on, 20 messages, 1000 tokens (default)" in shown
        [refused] = await tb.send("/ambient off", group=GROUP, sender="ann")  # a member
        assert "admins only" in refused
        [shown] = await tb.send("/ambient", group=GROUP, sender="root", admin=True)
        assert "on, 20 messages" in shown
        [done] = await tb.send("/ambient off", group=GROUP, sender="root", admin=True)
        assert done.endswith(": off.")
        await tb.send("secret plans", group=GROUP, sender="ann")
        await tb.send("hello", group=GROUP, sender="bob", at_bot=True)
        assert not any("secret plans" in (m.content or "") for m in _requests(tb)[-1])
        [shown] = await tb.send("/ambient", group=GROUP, sender="root", admin=True)
        assert ": off (" in shown
        await tb.send("/ambient on", group=GROUP, sender="root", admin=True)
        await tb.send("more plans", group=GROUP, sender="ann")
        await tb.send("hello again", group=GROUP, sender="bob", at_bot=True)
        assert "] ann: more plans" in (_requests(tb)[-1][-1].content or "")
    finally:
        await tb.aclose()
