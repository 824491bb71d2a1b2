"""The outbox's drain loop stops when told, even when told just as it is woken.

Python 3.11's `asyncio.wait_for` returns the inner result and drops a cancellation that arrives
together with it; the drain loop waited for its wake-up that way, so a `kick()` right before
`stop()` (a channel connecting as the bot shuts down) left the loop running and `stop()`
awaiting it for ever. Seen as a test run hanging in a fixture's teardown for 20 minutes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings


def make_bot(tmp_path: Path) -> Bot:
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'stop.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    return Bot(settings, model=None, builtins=False, load_plugins=False)


async def test_stop_right_after_a_wake_up_ends_the_drain_loop(tmp_path: Path) -> None:
    for _ in range(20):  # the wake-up and the cancellation meet in one loop iteration
        bot = make_bot(tmp_path)
        await bot.outbox.start()
        await asyncio.sleep(0.05)  # the loop is in its wait
        assert bot.outbox.drains
        loop = bot.outbox._task
        assert loop is not None
        bot.outbox.kick()
        async with asyncio.timeout(5):
            await bot.outbox.stop()
        assert loop.done(), "stop() returned with the drain loop still running"
        bot.storage.close()
