"""Confirming a platform's message only once the bot has stored it.

Telegram (getUpdates' offset, a webhook's 200), Slack (an envelope's ack, an Events API
request's 200) and Feishu (an event frame's answer, a webhook's 200) deliver a message again
until it is confirmed. Confirmed as soon as it is read, a message taken but not
yet stored (waiting behind a turn of its chat, or in the instant before its store) was lost when
the process died: the platform had let go of it and the bot had nothing. So these channels
confirm a message once the host says it is stored (`ChannelHost.handle`'s `on_stored`), or once
its job ended without storing it (not addressed to the bot, already stored, failed): nothing
would come of a second delivery. A job cancelled by a stop leaves its message unconfirmed: the
platform delivers it again after the restart, and a message that was stored after all is
recognised by its id (`host.was_stored`) and skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


class Taken:
    """One message a channel has taken from its platform, not to be confirmed before it is
    settled (stored, or its job ended)."""

    __slots__ = ("settled",)

    def __init__(self) -> None:
        self.settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def settle(self) -> None:
        """Stored, or nothing more will come of it: the platform may let go of it."""
        if not self.settled.done():
            self.settled.set_result(None)

    @property
    def done(self) -> bool:
        return self.settled.done()

    async def wait(self, timeout: float, stopping: asyncio.Event) -> bool:
        """Whether it settled within `timeout` seconds (given up when `stopping` is set)."""
        if not self.settled.done() and not stopping.is_set():
            stop = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait(
                    [self.settled, stop], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                stop.cancel()
        return self.settled.done()


def settled() -> Taken:
    """A message with nothing to store (an update of a kind the bot does not answer)."""
    taken = Taken()
    taken.settle()
    return taken


async def settle_after(taken: Taken, job: Awaitable[None]) -> None:
    """Run a message's job and settle it once the job ends, returned or raised; a job
    cancelled (the channel stopping) leaves it unsettled, so it is not confirmed."""
    try:
        await job
    except asyncio.CancelledError:
        raise
    except BaseException:
        taken.settle()
        raise
    taken.settle()
