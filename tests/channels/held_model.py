"""For tests of "confirmed to the platform only once stored" (chatfn/channels/intake.py): a scripted
echo model that holds a turn (a message saying "hold" waits for `gate`, so its chat's next
message waits, taken by the channel but not yet stored), and a bot whose `handle` raises before
the store (`broker_away`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from chatfn.testing import ScriptedModel


class HeldModel(ScriptedModel):
    def __init__(self, echo: Callable[..., Any], gate: asyncio.Event) -> None:
        super().__init__([echo], repeat_last=True)
        self.gate = gate

    async def complete(self, messages: Any, tools: Any = None) -> Any:
        if "hold" in (messages[-1].content or ""):
            await self.gate.wait()
        return await super().complete(messages, tools)


def broker_away(bot: Any, monkeypatch: pytest.MonkeyPatch, failures: dict[str, int]) -> list[str]:
    """Make `bot.handle` raise ConnectionError for the texts in `failures`, that many times
    each: what a cluster gateway does when its broker is away (RabbitMQ stopped is out of
    these tests' reach). Returns the texts `handle` was called with, in order."""
    real, tries, left = bot.handle, [], dict(failures)

    async def handle(msg: Any, *args: Any, **kwargs: Any) -> Any:
        tries.append(msg.text)
        if left.get(msg.text, 0) > 0:
            left[msg.text] -= 1
            raise ConnectionError("the broker is away")
        return await real(msg, *args, **kwargs)

    monkeypatch.setattr(bot, "handle", handle)
    return tries
