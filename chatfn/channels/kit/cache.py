"""What a channel looked up on its platform and keeps for a while (a user's name and roles, a
group's owner and managers): asked again once `ttl` seconds have passed, so a role changed
on the platform counts within that time, and forgotten all at once past `limit` entries (a
cache, not a store: a large workspace never fills memory)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Remembered"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Remembered(Generic[K, V]):
    """Values by key, each for `ttl` seconds (module docstring)."""

    def __init__(
        self, ttl: float, limit: int = 10000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self.clock = clock
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K, within: float | None = None) -> V | None:
        """The value kept for `key` if it is younger than `ttl` (and than `within` seconds,
        when given); None otherwise."""
        found = self._items.get(key)
        if found is None:
            return None
        age = self.clock() - found[0]
        return found[1] if age < min(self.ttl, self.ttl if within is None else within) else None

    def put(self, key: K, value: V) -> V:
        """Keep `value` for `key` from now; returns it."""
        if len(self._items) > self.limit:
            self._items.clear()
        self._items[key] = (self.clock(), value)
        return value

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Forget `key` (asked again next time); its value, or `default`."""
        found = self._items.pop(key, None)
        return default if found is None else found[1]
