"""An app's access token that expires (an app id and secret exchanged
for a token that lasts hours): the bookkeeping every platform with one wrote the same.

The token is fetched when first needed and again before it ends (how long before is the
platform's: a call in flight must not carry a token that expires on the way), one fetch at a
time however many calls want it (the platform may end the old token when a new one is
handed out); a call the platform answers "token not valid" forgets it, so the next call
fetches a new one. How the token is fetched, and what a refusal means, are the platform's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["ExpiringToken"]

T = TypeVar("T")


class ExpiringToken:
    """`fetch()` gives a token and its life in seconds; `use_for(life)` is how many of those
    seconds it is used before a new one is fetched. `clock` is monotonic seconds: a test moves
    it past a token's time instead of waiting for it."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[tuple[str, float]]],
        use_for: Callable[[float], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._use_for = use_for
        self.clock = clock
        self._token = ""
        self._until = 0.0  # the clock's time after which the token is not used
        self._lock = asyncio.Lock()
        self.fetched = 0  # tokens asked for (tests)

    async def get(self, *, fresh: bool = False) -> str:
        """The token, fetched now when there is none, it is due, or `fresh` asks for one."""
        if not fresh and self._valid():
            return self._token
        async with self._lock:
            if fresh or not self._valid():  # another call may have fetched it meanwhile
                self.fetched += 1
                token, life = await self._fetch()
                self._token, self._until = token, self.clock() + max(0.0, self._use_for(life))
            return self._token

    def forget(self, token: str | None = None) -> None:
        """The platform refused `token` (None: whichever is held): the next call fetches a new
        one. A token already replaced is left alone."""
        if token is None or token == self._token:
            self._until = 0.0

    async def using(
        self, call: Callable[[str], Awaitable[T]], invalid: Callable[[Exception], bool]
    ) -> T:
        """`call(token)`, made once more with a new token when it raises what `invalid` says
        is the platform's "token not valid" (another process fetched a new one, which ends
        the old one); raised as it is the second time."""
        token = await self.get()
        try:
            return await call(token)
        except Exception as exc:
            if not invalid(exc):
                raise
            self.forget(token)
        return await call(await self.get())

    def _valid(self) -> bool:
        return bool(self._token) and self.clock() < self._until
