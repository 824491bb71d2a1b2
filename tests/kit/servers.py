"""Waiting for a real server a test started as a process (Dovecot, ngIRCd, Prosody, Synapse)
to answer: one loop instead of a copy in each server's module.

The session fixtures turn a RuntimeError from a server's start into a skip (a failure on CI,
where the servers are installed), so this raises RuntimeError, not a test's AssertionError:
when the process exits first (with its log's tail), or when `timeout` passes (the process
stopped first, so that it does not outlive the session).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

from tests.kit.until import until_sync


def wait_started(
    process: subprocess.Popen[Any],
    ready: Callable[[], object],
    timeout: float,
    what: str,
    *,
    tail: Callable[[], str] = lambda: "",
    stop: Callable[[], None] | None = None,
    interval: float = 0.05,
) -> None:
    """Return once `ready()` (a probe: a connection, a greeting, an HTTP answer) is true; an
    OSError from it counts as not yet."""

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}): {tail()}")
        try:
            return bool(ready())
        except OSError:
            return False

    try:
        until_sync(answers, timeout, f"{what} did not answer", interval=interval)
    except AssertionError as exc:
        if stop is not None:
            stop()
        raise RuntimeError(f"{exc}: {tail()}") from None


__all__ = ["wait_started"]
