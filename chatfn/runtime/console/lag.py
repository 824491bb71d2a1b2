"""How late the event loop runs callbacks: a task sleeps a fixed interval and measures how much
longer it took. Runs only while the console is served, once a second, never per message."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

INTERVAL = 1.0


class LagMonitor:
    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self._samples: deque[float] = deque(maxlen=60)  # the last minute
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="console-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.interval)
            self._samples.append(max(0.0, time.perf_counter() - start - self.interval))

    def now_ms(self) -> float | None:
        """The largest lag of the last minute, in milliseconds (None: not measured yet)."""
        return round(max(self._samples) * 1000, 1) if self._samples else None
