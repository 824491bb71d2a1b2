"""`ChannelHost.handle(..., on_stored=)`: the moment a channel may confirm a message to its
platform (Telegram's offset, Slack's ack). It comes once the message is committed and before
anything acts on it; never for a message that could not be stored."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.storage.db import Storage, StorageError
from chatfn.storage.models import messages_table
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel
from providers.types import LLMResponse, Usage


def _msg(n: int) -> IncomingMessage:
    return IncomingMessage(
        platform="test", chat_id="c1", sender_id="u", text=f"hello {n}", message_id=f"m{n}"
    )


async def test_on_stored_comes_after_the_commit_and_before_the_model(tmp_path: Path) -> None:
    events: list[str] = []
    tb: TestBot

    def model(_messages: Any, _tools: Any) -> LLMResponse:
        events.append("model asked")
        return LLMResponse(content="hi", finish_reason="stop", usage=Usage(1, 1))

    def read() -> list[str]:
        with tb.bot.storage.engine.connect() as conn:  # committed: another connection sees it
            return list(conn.execute(select(messages_table.c.text)).scalars())

    def stored() -> None:
        # On a thread of its own: the suite's guard fails a statement on the loop's thread.
        with ThreadPoolExecutor(1) as pool:
            events.append(f"stored {pool.submit(read).result()}")

    tb = TestBot(tmp_path, model=ScriptedModel([model], repeat_last=True), builtins=False)
    sent: list[OutgoingMessage] = []

    async def sink(out: OutgoingMessage) -> None:
        sent.append(out)

    try:
        await tb.bot.channel_host.handle(_msg(1), sink, on_stored=stored)
    finally:
        await tb.aclose()
    assert events == ["stored ['hello 1']", "model asked"]
    assert [o.text for o in sent] == ["hi"]


async def test_no_on_stored_for_a_message_that_could_not_be_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = TestBot(
        tmp_path, model=ScriptedModel([]), builtins=False, config={"storage": {"busy_retry": 0}}
    )
    called: list[bool] = []

    def refuse(self: Storage, *args: Any, **kwargs: Any) -> Any:
        raise StorageError("begin_turn: the database is away")

    monkeypatch.setattr(Storage, "begin_turn", refuse)
    sent: list[OutgoingMessage] = []

    async def sink(out: OutgoingMessage) -> None:
        sent.append(out)

    try:
        await tb.bot.channel_host.handle(_msg(2), sink, on_stored=lambda: called.append(True))
    finally:
        await tb.aclose()
    assert called == []
    assert len(sent) == 1 and sent[0].notice  # the one sentence saying it was not stored
