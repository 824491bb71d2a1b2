"""Outbound discipline any channel can use: per-chat order, a per-chat send rate, and long
texts split at the platform's limit.

Why here and not in the Bot: the Bot already handles the messages of one chat one at a time,
but a channel may still send concurrently (a reminder fires while a reply is being sent; a
reply is split into parts), and chat platforms rate-limit and cap message length per platform.
Those rules belong to the way out, so each channel applies them with its own numbers:

    outbound = Outbound(max_length=3000, rate=1.0, burst=3)
    await outbound.deliver(("account", "group:42"), text, send_part)

`deliver` calls for one chat key run strictly in call order (FIFO from the moment `deliver` is
called, not from when its task first runs); different keys run concurrently. A platform's "slow
down" (HTTP 429 with `retry_after`, a `Retry-After` header, a rate-limit code) is `RetryAfter`
raised by `send_part`: the part is sent again after the wait, still in the chat's order (the
later parts and messages of that chat wait behind it). `split` may be any splitter, e.g.
chatfn/channels/split.py's Markdown-aware one; `Backoff` paces reconnects.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from chatfn.common.messages import RateLimited
from chatfn.runtime.channel_host import DeliveryPolicy

T = TypeVar("T")


def split_text(text: str, limit: int) -> list[str]:
    """Split `text` into parts of at most `limit` characters, breaking on line boundaries.

    Lines are packed greedily; a single line longer than `limit` is broken at its last space
    before the limit, or hard-cut when it has none (a URL, CJK text). Blank lines at the cut
    points are dropped; no part is empty.
    """
    if limit <= 0 or len(text) <= limit:
        return [text]
    parts: list[str] = []
    current = ""
    for line in text.split("\n"):
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) <= limit:
            current = candidate
            continue
        if current.strip():
            parts.append(current)
        current = ""
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit + 1)
            if cut <= 0:
                cut = limit
            head, line = line[:cut], line[cut:].lstrip(" ")
            if head.strip():
                parts.append(head.rstrip())
        current = line
    if current.strip():
        parts.append(current)
    return parts or [text[:limit]]


class RateLimiter:
    """A token bucket per key: at most `burst` messages at once, then `rate` per second.

    `rate <= 0` disables the limit. Buckets of idle keys (full again) are dropped once there
    are many, so a bot in thousands of chats keeps a small table.
    """

    def __init__(
        self, rate: float, burst: int = 1, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, stamp)

    def delay(self, key: Hashable) -> float:
        """Take one token for `key`; return how long to wait before sending (0: send now)."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        tokens, stamp = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) * self.rate)
        tokens -= 1.0
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > 4096:
            self._prune(now)
        return 0.0 if tokens >= 0 else -tokens / self.rate

    async def acquire(self, key: Hashable) -> None:
        wait = self.delay(key)
        if wait > 0:
            await asyncio.sleep(wait)

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        for key, (_tokens, stamp) in list(self._buckets.items()):
            if now - stamp >= full_after:
                del self._buckets[key]


class OrderedRunner:
    """Runs coroutines one at a time per key, in submission order; keys run concurrently.

    The order is fixed when `submit` is called (synchronously), so callers that submit in
    order get that order even if the event loop schedules their tasks differently. A failed
    or cancelled job does not block the ones after it.
    """

    def __init__(self) -> None:
        self._tails: dict[Hashable, asyncio.Task[Any]] = {}

    def submit(self, key: Hashable, job: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        prev = self._tails.get(key)
        task: asyncio.Task[T] = asyncio.ensure_future(self._run(key, prev, job))
        self._tails[key] = task
        return task

    async def _run(
        self, key: Hashable, prev: asyncio.Task[Any] | None, job: Callable[[], Awaitable[T]]
    ) -> T:
        try:
            if prev is not None and not prev.done():
                await asyncio.wait([prev])
            return await job()
        finally:
            if self._tails.get(key) is asyncio.current_task():
                del self._tails[key]

    def pending(self) -> int:
        """Keys with work queued or running (for tests and health output)."""
        return len(self._tails)


class RetryAfter(RateLimited):
    """Raised by a `send_part` when the platform asked to wait `seconds` before sending again
    (429 / `retry_after`): the kit's RateLimited, which `Outbound.deliver` hands to the
    delivery policy (waited out and the same part sent again, within `max_retry_wait`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the platform asked to wait {seconds:.1f} s", seconds)
        self.seconds = max(0.0, float(seconds))


class Backoff:
    """Exponential waits with jitter for reconnecting: `first`, doubling to `cap`; `reset()`
    once connected. `await backoff.wait(stop)` sleeps the next delay, or returns False at
    once when `stop` is set (the channel is stopping)."""

    def __init__(self, first: float = 0.5, cap: float = 60.0, jitter: float = 0.2) -> None:
        self.first, self.cap, self.jitter = first, cap, jitter
        self.attempt = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.first * (2**self.attempt))
        self.attempt += 1
        return delay * (1 + random.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        self.attempt = 0

    async def wait(self, stop: asyncio.Event | None = None) -> bool:
        delay = self.next_delay()
        if stop is None:
            await asyncio.sleep(delay)
            return True
        try:
            async with asyncio.timeout(delay):
                await stop.wait()
        except TimeoutError:
            return True
        return False


class Outbound:
    """Order, rate and length rules for one channel's outgoing messages."""

    def __init__(
        self,
        *,
        max_length: int,
        rate: float = 0.0,
        burst: int = 1,
        split: Callable[[str], list[str]] | None = None,
        max_retry_wait: float = 300.0,
    ) -> None:
        self.max_length = max_length
        self.limiter = RateLimiter(rate, burst)
        self.runner = OrderedRunner()
        self._split = split
        # Seconds one part may spend waiting on RetryAfter before the error reaches the caller.
        self.policy = DeliveryPolicy(max_retry_after=max_retry_wait)

    def split(self, text: str) -> list[str]:
        if self._split is not None:
            return self._split(text) or [text]
        return split_text(text, self.max_length)

    async def deliver(
        self, key: Hashable, text: str, send_part: Callable[[str, int], Awaitable[None]]
    ) -> None:
        """Send `text` to the chat `key` as one or more parts, in order with everything else
        sent to that chat, each part waiting for the chat's rate limit. `send_part(part, index)`
        does the platform call; index 0 is the part that carries a mention or a quote. An
        exception from `send_part` stops the remaining parts and reaches the caller."""

        async def job() -> None:
            for index, part in enumerate(self.split(text)):
                await self.policy.call(
                    "", key, functools.partial(send_part, part, index), pace=self.limiter.acquire
                )

        await self.runner.submit(key, job)
