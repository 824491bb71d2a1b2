"""Failed logins per (user name, client address): after `MAX_FAILURES` within `WINDOW`
seconds that pair is refused (429) until the window of its oldest failure has passed. Kept in
the process (a gateway's own), bounded in size: it slows guessing, it is not an account lock,
so a flood from other addresses cannot lock a user out."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 5
WINDOW = 15 * 60.0
MAX_PAIRS = 10_000


class LoginLimiter:
    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self.clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()

    def _recent(self, key: tuple[str, str]) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        cutoff = self.clock() - self.window
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, user: str, address: str) -> float | None:
        """Seconds until this pair may try again; None: it may now."""
        times = self._recent((user, address))
        if len(times) < self.max_failures:
            return None
        return max(1.0, times[0] + self.window - self.clock())

    def failed(self, user: str, address: str) -> None:
        key = (user, address)
        times = self._failures.setdefault(key, deque(maxlen=self.max_failures))
        times.append(self.clock())
        self._failures.move_to_end(key)
        while len(self._failures) > MAX_PAIRS:
            self._failures.popitem(last=False)

    def succeeded(self, user: str, address: str) -> None:
        self._failures.pop((user, address), None)
