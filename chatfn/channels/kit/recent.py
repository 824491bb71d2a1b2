"""What a channel remembers of the last messages and chats it saw (a quoted message's text, the
account that serves a chat, when a message arrived, a thread's root): the last `limit`
entries, so a busy bot never fills its memory with them, and a key put again counts as new.
The same few lines every channel wrote around an OrderedDict."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

__all__ = ["Recent"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(OrderedDict[K, V]):
    """The last `limit` entries put, oldest first (module docstring)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Keep `value` for `key` as the newest entry, forgetting the oldest past `limit`."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)
        return value
