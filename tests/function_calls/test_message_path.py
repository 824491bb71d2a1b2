"""Issue 37 §2: "does this message reach a model" is one decision (`path_of`), read both by the
router's dispatch and by the runtime's turn plan, which counts a message that reaches a model
against the day's limits in the transaction that stores it. Checked here on every combination
that matters: the decision itself, and that a bot's counted messages agree with what its
router did (a message counted but not sent to the model, or the reverse, would show)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from sqlalchemy import func, select

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime.settings import parse_settings
from chatfn.storage.models import message_fates_table
from chatfn.testing import ScriptedModel, TestBot, say
from function_calls.chat_settings import resolve
from function_calls.router import path_of

_ids = itertools.count(1)


def _msg(group: bool, at: bool, text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="test",
        chat_id="group:g" if group else "private:u",
        sender_id="u",
        sender_name="u",
        text=text,
        is_group=group,
        is_at_bot=at,
        message_id=f"m{next(_ids)}",
    )


@pytest.mark.parametrize("rule", ["always", "at", "never"])
@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize("at", [False, True])
@pytest.mark.parametrize("text", ["hello", "/help"])
@pytest.mark.parametrize("has_model", [False, True])
def test_the_decision(rule: str, group: bool, at: bool, text: str, has_model: bool) -> None:
    config = parse_settings({"bot": {"respond_in_groups": rule}})
    msg = _msg(group, at, text)
    path = path_of(msg, resolve(config, msg), has_model)
    command = text.startswith("/")
    if group and rule == "never":
        assert path == "ignored"
    elif group and not command and not (rule == "always" or at):
        assert path == "not_addressed"
    elif command:
        assert path == "command"
    else:
        assert path == ("model" if has_model else "no_model")


@pytest.mark.parametrize("rule", ["always", "at", "never"])
async def test_counted_exactly_when_the_model_was_asked(tmp_path: Path, rule: str) -> None:
    """Each message of the grid through a real bot: its fate is `answered` by the model exactly
    when `path_of` said `model`, and the model got exactly those messages."""
    messages = [
        _msg(g, a, t) for g in (False, True) for a in (False, True) for t in ("hi", "/help")
    ]
    model = ScriptedModel([say("ok")] * len(messages))
    tb = TestBot(tmp_path, model=model, config={"bot": {"respond_in_groups": rule}})
    try:
        expected = 0
        for msg in messages:
            chat = resolve(tb.bot.settings, msg)

            async def sink(_out: OutgoingMessage) -> None:
                return None

            await tb.bot.handle(msg, sink)
            expected += path_of(msg, chat, True) == "model"
        query = select(message_fates_table.c.fate, func.count()).group_by(
            message_fates_table.c.fate
        )
        with tb.bot.storage.engine.connect() as conn:
            fates = {fate: n for fate, n in conn.execute(query)}
    finally:
        await tb.aclose()
    assert len(model.requests) == expected
    assert fates.get("answered", 0) == expected
