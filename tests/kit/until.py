"""Waiting for a condition in a test: one helper instead of a poller per file.

A test that needs something to have happened (a row marked, a reply received, a process up)
waits for exactly that, with a deadline, rather than sleeping a fixed time: a fixed sleep is
too short on a loaded machine (a flaky test) and too long everywhere else (a slow suite).
`until` polls a predicate every few milliseconds and fails with `message` once `timeout` runs
out; `until_sync` does the same for tests with no event loop (subprocess tests).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import NoReturn

#: What a predicate may return: a value judged by its truth, or an awaitable of one.
Predicate = Callable[[], object]
#: A fixed message, or one made on failure (to show the state that did not come right).
Message = str | Callable[[], str]

#: Between two checks: short enough that a test waits no longer than it must, long enough
#: that a predicate reading a database does not keep a core busy.
INTERVAL = 0.02


def _text(message: Message, timeout: float) -> str:
    text = message() if callable(message) else message
    return f"{text} (not within {timeout:g} s)"


async def until(
    predicate: Predicate,
    timeout: float = 5.0,
    message: Message = "condition not met",
    *,
    interval: float = INTERVAL,
) -> None:
    """Return once `predicate()` is true (awaited when it returns an awaitable); fail the test
    with `message` when `timeout` seconds pass first. The predicate is checked once more at
    the deadline, so a condition that came right during the last interval still passes."""
    deadline = time.monotonic() + timeout
    while True:
        if await _holds(predicate):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(_text(message, timeout))
        await asyncio.sleep(interval)


async def _holds(predicate: Predicate) -> bool:
    result = predicate()
    if inspect.isawaitable(result):
        result = await result
    return bool(result)


def until_sync(
    predicate: Callable[[], object],
    timeout: float = 5.0,
    message: Message = "condition not met",
    *,
    interval: float = INTERVAL,
) -> None:
    """`until` for a test with no running event loop (it blocks the calling thread)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(_text(message, timeout))
        time.sleep(interval)


async def wait_event(event: asyncio.Event, timeout: float = 5.0, message: Message = "") -> None:
    """Wait for `event` (set by a fake server or a hook when the thing happens), failing the
    test with `message` after `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        raise AssertionError(_text(message or "event not set", timeout)) from None


async def hang() -> NoReturn:
    """Never return (until cancelled): a model, server or function that never answers, for a
    test of the timeout that must cut it short. Says so, where a long sleep looked like a wait."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


__all__ = ["hang", "until", "until_sync", "wait_event"]
