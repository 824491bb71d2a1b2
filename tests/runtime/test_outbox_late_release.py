"""A drain pass that read the outbox while a live send was still going never sends that row's
stale text.

A live send that gives up part-way (Telegram's 429 after the first part of three) stores the
parts still owed as the row's text and hands the row to the drain. A drain pass whose read of
the table came before that, and whose check came after, used to send the row's text as it was
read, the parts already sent included (seen once under load in
tests/channels/telegram/test_telegram.py: part 0 twice). Now such a row, and its chat, wait for the
pass to read the table again."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from chatfn.common.messages import NotDelivered, OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.storage import db as storage_db
from tests.kit import until


class GivesUpAfterTheFirstPart:
    """A channel whose first send delivers the first part, waits for `gate`, then raises
    NotDelivered with the rest; later sends deliver every part."""

    platform = "t"

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.gate = asyncio.Event()
        self.first = True

    async def send(self, message: OutgoingMessage) -> None:
        parts = message.text.split("|")
        if self.first:
            self.first = False
            self.sent.append(parts[0])
            await self.gate.wait()
            raise NotDelivered("flood control", rest="|".join(parts[1:]))
        self.sent.extend(parts)


async def test_a_row_released_after_the_drains_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The drain's read is held on a storage thread below while the live send writes on
    # another: two threads, where a SQLite bot runs one (the race is the same with one, but
    # only a second thread lets the test stop the read in the middle of it).
    monkeypatch.setattr(storage_db, "SQLITE_THREADS", 2)
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'late.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    bot = Bot(settings, model=None, builtins=False, load_plugins=False)
    channel = GivesUpAfterTheFirstPart()
    bot.delivery.register(channel)
    outbox, store = bot.outbox, bot.storage.outbox
    await outbox.start()
    loop = asyncio.get_running_loop()
    read, released = asyncio.Event(), threading.Event()
    original = store.pending
    armed = False

    def pending(limit: int) -> Any:
        """The drain's read: taken, then held until the live send has given up."""
        rows = original(limit)
        if armed and not released.is_set():
            loop.call_soon_threadsafe(read.set)
            released.wait(10)
        return rows

    store.pending = pending  # type: ignore[method-assign]
    try:
        out = OutgoingMessage("t", "c1", "part 0|part 1|part 2")
        await outbox.write(out)
        live = asyncio.create_task(outbox.dispatch(out))
        await until(lambda: channel.sent, 5, "the live send did not start")
        armed = True
        outbox.kick()
        async with asyncio.timeout(5):
            await read.wait()  # the pass has the row as it was: three parts
        channel.gate.set()
        await live  # gave up: the row now holds parts 1 and 2, handed to the drain
        released.set()
        await until(lambda: len(channel.sent) >= 3, 5, f"parts sent: {channel.sent}")
        # Waits for the pass that held the stale read to end, then makes one more: anything
        # either would send twice has been sent.
        await outbox.drain()
        assert channel.sent == ["part 0", "part 1", "part 2"]
    finally:
        released.set()
        await outbox.stop()
        bot.storage.close()
