"""Fixtures for the built-in functions: a started TestBot on a real SQLite file whose
unsolicited messages (reminders, welcomes) land in a list the test can wait on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from chatfn.testing import TestBot
from function_calls.context import OutgoingMessage
from providers.base import ChatModel


class Outbox:
    """A channel for the TestBot's platform: collects what the bot sends on its own."""

    platform = "test"

    def __init__(self) -> None:
        self.messages: list[OutgoingMessage] = []
        self._changed = asyncio.Event()

    async def send(self, message: OutgoingMessage) -> None:
        self.messages.append(message)
        self._changed.set()

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    async def wait(self, count: int = 1, timeout: float = 5.0) -> list[OutgoingMessage]:
        """Wait until at least `count` messages arrived; fail the test after `timeout` s."""
        async with asyncio.timeout(timeout):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.messages


MakeBot = Callable[..., Awaitable[tuple[TestBot, Outbox]]]


@pytest.fixture
async def make_bot(tmp_path: Path) -> AsyncIterator[MakeBot]:
    """`tb, outbox = await make_bot(config={...}, model=...)`; several calls share one database
    file (a restart), and every bot is closed at the end."""
    bots: list[TestBot] = []

    async def make(
        *, config: dict[str, Any] | None = None, model: ChatModel | None = None, start: bool = True
    ) -> tuple[TestBot, Outbox]:
        tb = TestBot(tmp_path, config=config, model=model)
        outbox = Outbox()
        tb.bot.delivery.register(outbox)
        if start:
            await tb.start()
        bots.append(tb)
        return tb, outbox

    yield make
    for tb in bots:
        await tb.aclose()
