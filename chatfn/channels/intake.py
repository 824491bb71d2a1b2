"""Confirming a platform's message only once the bot has stored it.

Many platforms deliver a message again until it is confirmed (a long poll's offset, a
socket's acknowledgement, a webhook's 200). Confirmed as soon as it is read, a message taken
but not yet stored (waiting behind a turn of its chat, or in the instant before its store)
was lost when the process died: the platform had let go of it and the bot had nothing. So
their channels confirm
a message once the host says it is stored (`ChannelHost.handle`'s `on_stored`), or once its
job ended without storing it (not addressed to the bot, already stored, refused with a word to
the user): nothing would come of a second delivery.

Two outcomes leave a message unconfirmed, so the platform delivers it again:
- a job cancelled by a stop: after the restart the message comes again, and one that was
  stored after all is recognised by its id (`host.was_stored`) and skipped;
- a job that failed before the message was stored (a gateway whose broker is away, a bug): the
  message is released, and taken again when the platform delivers it again, not sooner than
  `RETAKE_AFTER` seconds after the failure (a long poll hands it back at once). Its
  `MAX_TAKES`-th failure settles it instead: a message that fails every time must not hold
  a long poll's offset, and every later message with it, for good.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

RETAKE_AFTER = 5.0  # seconds before a released message is taken again
MAX_TAKES = 3  # the last failure confirms it (given up) instead of releasing it


class Taken:
    """One message a channel has taken from its platform. `outcome` resolves True when it may
    be confirmed (stored, or its job ended), False when it was released (not stored: to be
    taken again when the platform sends it again)."""

    __slots__ = ("outcome", "released_at", "take")

    def __init__(self, previous: Taken | None = None) -> None:
        """`previous`: the released take of the same message, when this one takes it again."""
        self.outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.released_at: float | None = None
        self.take: int = 1 if previous is None else previous.take + 1

    def settle(self) -> None:
        """Stored, or nothing more will come of it: the platform may let go of it."""
        if not self.outcome.done():
            self.outcome.set_result(True)

    def release(self) -> bool:
        """Not stored and not to be confirmed: the platform's next delivery takes it again.
        False when this was its last take: settled instead (given up)."""
        if self.outcome.done():
            return True
        if self.take >= MAX_TAKES:
            self.settle()
            return False
        self.outcome.set_result(False)
        self.released_at = time.monotonic()
        return True

    @property
    def done(self) -> bool:
        return self.outcome.done()

    @property
    def confirmed(self) -> bool:
        return self.outcome.done() and self.outcome.result()

    def retake(self) -> bool:
        """Whether a delivery of this message now should be taken again (released, and
        `RETAKE_AFTER` has passed)."""
        return self.released_at is not None and time.monotonic() - self.released_at >= RETAKE_AFTER

    async def wait(self, timeout: float, stopping: asyncio.Event) -> bool:
        """Whether it may be confirmed within `timeout` seconds (False once released, or when
        `stopping` is set first)."""
        if not self.outcome.done() and not stopping.is_set():
            stop = asyncio.ensure_future(stopping.wait())
            either: list[asyncio.Future[Any]] = [self.outcome, stop]
            try:
                await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
        return self.confirmed


def settled() -> Taken:
    """A message with nothing to store (an update of a kind the bot does not answer)."""
    taken = Taken()
    taken.settle()
    return taken


async def settle_after(taken: Taken, job: Awaitable[None]) -> None:
    """Run a message's job and settle it once the job ends; a job that raised releases it,
    a job cancelled (the channel stopping) leaves it undecided: neither is confirmed."""
    try:
        await job
    except asyncio.CancelledError:
        raise
    except BaseException:
        taken.release()
        raise
    taken.settle()
