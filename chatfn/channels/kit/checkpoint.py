"""A stream position (a sync token, an update offset) stored only once every message read
before it has been handled: a crash re-reads what was not handled (a message stored already is
skipped by its id) and never loses what came meanwhile. Batches are saved in the order they
were read, and never past a message whose handling was cancelled (the bot stopped): the next
start reads it again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Checkpoint"]


class Checkpoint:
    """`save(position)` stores a position (the platform's store)."""

    def __init__(self, save: Callable[[str], Awaitable[Any]]) -> None:
        self._save = save
        self._saving: asyncio.Future[bool] | None = None

    def after(self, batch: list[asyncio.Future[Any]], position: str) -> None:
        """Store `position` once `batch` (the tasks handling what was read before it) and every
        earlier batch are done."""
        previous = self._saving

        async def save() -> bool:
            if previous is not None and not await previous:
                return False
            if batch:
                await asyncio.wait(batch)
                if any(task.cancelled() for task in batch):
                    return False
            await self._save(position)
            return True

        self._saving = asyncio.ensure_future(save())

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (at most `timeout` s) for the last position to be stored: stopping. Raises
        what the save raised, or TimeoutError."""
        if self._saving is not None:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._saving)
