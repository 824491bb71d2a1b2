"""A drain pass over many chats leaves the event loop to other work while it starts them.

Each send does some work before its first wait (OneBot splits and renders a long text and looks
its account up), and the drain used to start every chat's send in one pass of the event loop:
a thousand chats owed to an account that went away (issue 34, item 5) held every other
account's replies that long, on every pass. Now the drain starts `DRAIN_SLICE` chats per pass.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

from chatfn.common.messages import NotDelivered, OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.storage.outbox import PAYLOAD_FIELDS, add_in

CHATS = 1000
WORK = 0.001  # seconds of work each send does before it learns it cannot send


class AwayChannel:
    """A channel whose every send does `WORK` seconds of work, then finds its account away."""

    platform = "t"

    def __init__(self) -> None:
        self.tried = 0

    async def send(self, message: OutgoingMessage) -> None:
        self.tried += 1
        end = time.thread_time() + WORK  # CPU of this thread, however busy the machine
        while time.thread_time() < end:
            pass
        await asyncio.sleep(0.05)  # e.g. waiting a moment for the account to come back
        raise NotDelivered("account away")


async def _longest_stall(stop: asyncio.Event) -> float:
    """The most CPU the event loop's thread spent on other work between two of this task's
    10 ms naps, until `stop`: what held the loop, counted in the thread's own CPU time, so
    a loaded machine that keeps the process off a core for a while does not count."""
    worst = 0.0
    while not stop.is_set():
        before = time.thread_time()
        await asyncio.sleep(0.01)
        worst = max(worst, time.thread_time() - before)
    return worst


async def test_a_pass_over_a_thousand_chats_does_not_hold_the_loop(tmp_path: Path) -> None:
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'slices.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    bot = Bot(settings, model=None, builtins=False, load_plugins=False)
    channel = AwayChannel()
    bot.delivery.register(channel)
    owed = [OutgoingMessage("t", f"chat{i}", f"reply {i}") for i in range(CHATS)]

    def write() -> None:  # owed from before this start: the drain's
        with bot.storage.engine.begin() as conn:
            for out in owed:
                payload = {k: getattr(out, k) for k in PAYLOAD_FIELDS}
                add_in(conn, "t", out.chat_id, payload, bot.delivery._history_values(out))

    try:
        await bot.storage.run(write)
        bot.outbox.drains = False  # no loop of its own: the one pass below is the test's
        await bot.outbox.start()  # the rows above are owed from before this start
        stop = asyncio.Event()
        # What is measured is the drain's slicing, not the collector: the loop was once held
        # 3.56 s late in README's lane (a worker with thousands of tests behind it), and never
        # alone or beside three busy processes; a full collection is the likely cause.
        gc.collect()
        gc.disable()
        try:
            probe = asyncio.create_task(_longest_stall(stop))
            await asyncio.sleep(0.05)
            await bot.outbox.drain()
            stop.set()
            stalled = await probe
        finally:
            gc.enable()
        assert channel.tried == CHATS  # every chat was tried
        # All at once: the loop was away for the whole pass (about CHATS * WORK, 1 s); in
        # slices of DRAIN_SLICE (20), for about 20 ms at a time.
        assert stalled < 0.4, f"the event loop was held {stalled:.2f} s by one drain pass"
        assert len(await bot.outbox.waiting("t")) == CHATS  # none lost: all still wait
    finally:
        await bot.aclose()
