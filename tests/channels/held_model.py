"""A scripted echo model that holds a turn: a message saying "hold" waits for `gate` before it
is answered, so its chat's turn keeps running and the chat's next message waits, taken by the
channel but not yet stored (what tests of "confirmed only once stored" need)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from function_calls.testing import ScriptedModel


class HeldModel(ScriptedModel):
    def __init__(self, echo: Callable[..., Any], gate: asyncio.Event) -> None:
        super().__init__([echo], repeat_last=True)
        self.gate = gate

    async def complete(self, messages: Any, tools: Any = None) -> Any:
        if "hold" in (messages[-1].content or ""):
            await self.gate.wait()
        return await super().complete(messages, tools)
