"""A OneBot account whose implementation stops reading its socket (hung, or a peer that never
reads) must not stall the other accounts: each connection's sending is bounded, and what the
deaf account owes goes back to the outbox, not lost. Real sockets: the deaf account is a raw
TCP client that completes the WebSocket handshake and then never reads again."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time

from sqlalchemy import func, select

from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.storage.models import outbox_table
from chatfn.storage.outbox import PAYLOAD_FIELDS, add_in
from tests.channels.conftest import TOKEN, MakeOneBot
from tests.channels.onebot.onebot_sim import plain
from tests.channels.onebot.test_onebot import ALICE, GROUP, connected
from tests.kit import until

DEAF = 20002000


def _frame(text: str) -> bytes:
    """One masked text frame, as a client sends it (RFC 6455 §5.2)."""
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x81, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def deaf_account(url: str) -> tuple[asyncio.StreamWriter, socket.socket]:
    """Connect as account DEAF, post its lifecycle event, then never read: its receive buffer
    fills, and the bot's writes to it stop draining."""
    host_port = url.removeprefix("ws://").split("/", 1)[0]
    host, port = host_port.split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /onebot/v11/ws HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"X-Self-ID: {DEAF}\r\nX-Client-Role: Universal\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()
    )
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    event = {
        "time": int(time.time()),
        "self_id": DEAF,
        "post_type": "meta_event",
        "meta_event_type": "lifecycle",
        "sub_type": "connect",
    }
    writer.write(_frame(json.dumps(event)))
    await writer.drain()
    return writer, sock  # from here on, nobody reads `reader`


async def _states(bot: Bot) -> dict[str, int]:
    def count() -> dict[str, int]:
        q = select(outbox_table.c.state, func.count()).group_by(outbox_table.c.state)
        with bot.storage.engine.connect() as conn:
            return {r[0]: r[1] for r in conn.execute(q)}

    return await bot.storage.run(count)


async def _owe(bot: Bot, messages: list[OutgoingMessage]) -> list[asyncio.Task[None]]:
    """Store `messages` in the outbox (one transaction: 1500 writes of their own would keep
    SQLite's one storage thread busy for seconds, and every account's turns queue there,
    which is not what this test is about), then hand them to their channel, 100 per pass of
    the event loop, as turns and reminders would (1500 sends started in one pass take the
    loop for that pass, whatever the account does)."""

    def write() -> None:
        with bot.storage.engine.begin() as conn:
            for out in messages:
                payload = {k: getattr(out, k) for k in PAYLOAD_FIELDS}
                history = bot.delivery._history_values(out)
                out.event_id, _ = add_in(conn, out.platform, out.chat_id, payload, history)

    await bot.storage.run(write)
    tasks: list[asyncio.Task[None]] = []
    for n, out in enumerate(messages):
        if n % 100 == 0:
            await asyncio.sleep(0)
        tasks.append(asyncio.create_task(bot.delivery.pass_on(out)))
    return tasks


async def _drain_twice(bot: Bot) -> None:
    for _ in range(2):
        await bot.outbox.drain()


def _done(task: asyncio.Task[None] | None) -> bool:
    return task is not None and task.done()


async def test_an_account_that_never_reads_does_not_stall_the_others(
    make_onebot: MakeOneBot,
) -> None:
    # the other account's round trips are one sender pinging as fast as it is answered, which
    # the loop guard (bot.loop_guard, 20 a minute) would pause: off, it is not what is tested
    bot, channel, url = await make_onebot(
        action_timeout=3.0, reconnect_wait=0.2, bot_config={"loop_guard": {"messages": 0}}
    )
    writer, sock = await deaf_account(url)
    await until(lambda: str(DEAF) in channel.self_ids, 5, "the deaf account did not connect")
    deaf = channel._conns[str(DEAF)]
    sim = await connected(url)  # a second account, reading as usual
    for i in range(1500):
        channel.sender.routes[f"private:{i}"] = str(DEAF)  # chats the deaf account served
    reply = "word " * 1800  # 9 KB: three parts of 3000 characters
    messages = [OutgoingMessage("onebot", f"private:{i}", f"{i} {reply}") for i in range(1500)]
    owed = await _owe(bot, messages)
    drains: asyncio.Task[None] | None = None
    try:
        # 1500 replies of 9 KB owed to an account that reads nothing: the other account's
        # round trips, all along: while they are written to the deaf socket and their
        # actions wait for answers, when it is found deaf and dropped, while its messages go
        # back to the outbox, and while the outbox tries them again (a pass over 1500 chats).
        trips: list[float] = []
        async with asyncio.timeout(90):
            while not all(t.done() for t in owed) or len(trips) < 3 or not _done(drains):
                if all(t.done() for t in owed) and drains is None:
                    # What the deaf account owes is back in the outbox: its drain tries
                    # every chat again (as the outbox's loop does each second) meanwhile.
                    drains = asyncio.create_task(_drain_twice(bot))
                started = time.monotonic()
                await sim.group_message(
                    GROUP, ALICE, f"[CQ:at,qq=10001000] /echo ping {len(trips)}"
                )
                action = (await sim.wait_actions(len(trips) + 1, "send_group_msg", timeout=60))[-1]
                trips.append(time.monotonic() - started)
                assert plain(action["params"]["message"]) == f"ping {len(trips) - 1}"
                await asyncio.sleep(0.1)
        # README's promise is 2 s; a round trip here takes 0.4-0.6 s on a quiet machine, 1.4-2.2 s
        # with the suite's other worker busy on the same 2 cores, and 4.6-6 s on the code that
        # split and rendered every owed message in one pass of the loop. The bound leaves room
        # for the second worker and still fails that code.
        assert max(trips) < 3.0, f"the reading account waited up to {max(trips):.2f} s"
        # The deaf socket was found deaf (our bytes untaken) and dropped; what it owes waits
        # in the outbox for it: none lost.
        assert deaf.gone and str(DEAF) not in channel.self_ids
        await bot.outbox.flush_marks()  # the last echo's mark waits for a write (batched)
        assert await _states(bot) == {"pending": 1500, "delivered": len(trips)}
    finally:
        for task in [*owed, *([drains] if drains else [])]:
            task.cancel()
        await sim.close()
        writer.close()
        sock.close()
