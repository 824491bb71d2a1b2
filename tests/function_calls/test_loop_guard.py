"""The loop guard counts an exchange, not a pace (issue 40 §3, function_calls/loop_guard.py):
a human's burst of messages (typed while the first is being answered) is answered in full,
while an account that answers every reply at once is paused after `bot.loop_guard.messages`
rounds with one notice. Two whole bots wired to each other: tests/channels/http/
test_http_fate.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chatfn.common.config import LoopGuardSettings
from chatfn.common.messages import IncomingMessage
from chatfn.testing import ScriptedModel, TestBot, say
from function_calls.loop_guard import LoopGuard

NOTICE = "I am pausing this exchange with"
GUARD = {"messages": 3, "window": 60, "cooldown": 300}


def _bot(tmp_path: Path) -> TestBot:
    model = ScriptedModel([say("noted")], repeat_last=True)
    return TestBot(tmp_path, model=model, config={"bot": {"loop_guard": GUARD}})


async def test_a_burst_from_a_fast_human_is_answered_in_full(tmp_path: Path) -> None:
    tb = _bot(tmp_path)
    try:
        # eight lines sent at once: they wait for the chat's turn one after another, each
        # answered before the next is read, but none came in after an answer
        replies = await asyncio.gather(*(tb.send(f"line {i}") for i in range(8)))
        assert [r for r in replies] == [["noted"]] * 8
    finally:
        await tb.aclose()


async def test_an_account_answering_every_reply_at_once_is_paused_once(tmp_path: Path) -> None:
    tb = _bot(tmp_path)
    try:
        said = [await tb.send(f"round {i}", sender="echo-bot") for i in range(6)]
        # rounds 1-3 answered, the 4th passes the limit: one notice, then nothing
        assert said[:3] == [["noted"]] * 3
        assert len(said[3]) == 1 and said[3][0].startswith(NOTICE)
        assert "4 messages in 60 seconds" in said[3][0]
        assert said[4:] == [[], []]
        # the pair is (this bot, echo-bot): another member of the chat is answered
        assert await tb.send("hello", sender="carol") == ["noted"]
    finally:
        await tb.aclose()


def _msg(sender: str) -> IncomingMessage:
    return IncomingMessage(platform="t", chat_id="group:g", sender_id=sender, text="x")


def test_rounds_cool_down_and_start_again() -> None:
    guard = LoopGuard(LoopGuardSettings(messages=2, window=10, cooldown=30))
    verdicts = []
    for t in range(4):  # alternating: each message came in after the bot's answer
        msg = _msg("x")
        guard.arrived(msg)
        verdicts.append(guard.check(msg, float(t)))
        guard.answered(msg)
    assert verdicts == ["pass", "pass", "trip", "cooling"]
    msg = _msg("x")
    guard.arrived(msg)
    assert guard.check(msg, 40.0) == "pass"  # after the cool-down: a new exchange
    # rounds older than the window no longer count
    for later in (100.0, 120.0, 140.0):
        msg = _msg("x")
        guard.arrived(msg)
        assert guard.check(msg, later) == "pass"
        guard.answered(msg)
    off = LoopGuard(LoopGuardSettings(messages=0))
    assert all(off.check(_msg("x"), float(t)) == "pass" for t in range(50))
