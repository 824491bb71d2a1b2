"""Each message that waited for a `/v1/events` subscriber goes to one client (issue 34, item 5).

After a restart, a message that waited for its first subscriber went to the first client
without an id and again to a second one that connected before the first's delivery mark was
in the database (marks are batched: a moment at best, longer when the database is busy or a
turn's write carries them), and two clients connecting at once both got every waiting message.
Now the outbox hands each waiting message to one client (`Outbox.take_waiting`,
`Outbox.hand_over`). Real aiohttp server and clients, real SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime import outbox as outbox_module
from chatfn.runtime.bot import Bot
from tests.channels.test_outbox_delivery import make_bot, out, read_events, until_states
from tests.kit import until


@pytest.fixture(autouse=True)
def slow_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Delivery marks reach the database 5 s after a client took a message, as when the
    database is busy: the window in which a second client used to get it again."""
    monkeypatch.setattr(outbox_module, "HOLD", 5.0)


@contextlib.asynccontextmanager
async def restarted(tmp_path: Path, *texts: str) -> AsyncIterator[tuple[Bot, str]]:
    """`texts` sent to HTTP chats while nobody listened, then the bot restarted: they wait."""
    first = make_bot(tmp_path)
    await first.start()
    for i, text in enumerate(texts):
        await first.send(out(text, chat=f"c{i}"))
    await first.aclose()
    bot = make_bot(tmp_path)
    channel = HttpChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    try:
        yield bot, f"http://127.0.0.1:{channel.bound_port}/v1/events"
    finally:
        await channel.stop()
        await bot.aclose()


async def until_live(bot: Bot, clients: list[aiohttp.ClientResponse], owed: int) -> list[list[int]]:
    """The waiting messages' ids each client got, read up to two live events sent once the
    `owed` waiting messages went out (to some client: written from `take_waiting`, or passed
    on by the outbox drain to the clients' queues, which a first live event read from the
    table may overtake; the second comes through the queue, after them)."""
    await until(lambda: bot.outbox.stats()["delivered"] >= owed, 5, "waiting ones not delivered")
    got: list[list[int]] = [[] for _ in clients]
    live: list[int] = []
    for n in range(2):
        marker = out(f"live {n}", chat="now")
        await bot.send(marker)
        assert marker.event_id is not None
        live.append(marker.event_id)
        for ids in got:
            ids.append(0)  # where this round starts
        for client, ids in zip(clients, got, strict=True):
            while ids[-1] != marker.event_id:
                [(eid, _)] = await read_events(client, 1)
                ids.append(eid)
    return [[i for i in ids if i and i not in live] for ids in got]


async def test_a_second_client_does_not_get_what_the_first_took(tmp_path: Path) -> None:
    async with restarted(tmp_path, "reminder: ping") as (bot, url), aiohttp.ClientSession() as s:
        async with s.get(url) as first:
            [(eid, data)] = await read_events(first, 1)
            assert (eid, data["text"]) == (1, "reminder: ping")
            async with s.get(url) as second:  # its delivery mark is not written yet
                assert await second.content.readline() == b": connected\n"
                assert await until_live(bot, [second], 1) == [[]]
        await bot.outbox.flush_marks()
        await until_states(bot, [(i, "delivered") for i in (1, 2, 3)])  # 2, 3: live


async def test_two_clients_connecting_at_once_share_the_waiting_messages(tmp_path: Path) -> None:
    texts = [f"owed {i}" for i in range(6)]
    async with restarted(tmp_path, *texts) as (bot, url), aiohttp.ClientSession() as s:
        async with contextlib.AsyncExitStack() as stack:
            clients = await asyncio.gather(
                *(stack.enter_async_context(s.get(url)) for _ in range(2))
            )
            got = await until_live(bot, list(clients), 6)
    assert sorted(got[0] + got[1]) == [1, 2, 3, 4, 5, 6]  # every one, none twice
