"""One lock per chat, so a chat's messages are handled strictly in order while different chats
run concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any


class ChatLocks:
    """One asyncio.Lock per chat, dropped when no one holds or waits for it: a bot serving
    thousands of groups keeps locks only for the chats it is working on. The key is whatever
    names a chat to the caller ((platform, chat id) in the Bot, a string on a broker
    partition)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, list[Any]] = {}

    async def __call__(self, key: Hashable, work: Callable[[], Awaitable[Any]]) -> Any:
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                return await work()
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                self._locks.pop(key, None)

    def __len__(self) -> int:
        return len(self._locks)
