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
from typing import Any

from sqlalchemy import func, select

from chatfn.channels.onebot.link import STALLED_BYTES
from chatfn.common.messages import OutgoingMessage
from chatfn.storage.models import outbox_table
from tests.channels.conftest import TOKEN, MakeOneBot
from tests.channels.onebot_sim import plain
from tests.channels.test_onebot import ALICE, GROUP, connected

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


def _states(bot: Any) -> dict[str, int]:
    q = select(outbox_table.c.state, func.count()).group_by(outbox_table.c.state)
    with bot.storage.engine.connect() as conn:
        return {r[0]: r[1] for r in conn.execute(q)}


async def test_an_account_that_never_reads_does_not_stall_the_others(
    make_onebot: MakeOneBot,
) -> None:
    bot, channel, url = await make_onebot(action_timeout=3.0, reconnect_wait=0.2)
    writer, sock = await deaf_account(url)
    async with asyncio.timeout(5):
        while str(DEAF) not in channel.self_ids:
            await asyncio.sleep(0.01)
    deaf = channel._conns[str(DEAF)]
    sim = await connected(url)  # a second account, reading as usual
    big = "x" * 9000
    for i in range(1500):
        channel._route[f"private:{i}"] = str(DEAF)  # chats the deaf account served
    owed = [
        asyncio.create_task(bot.send(OutgoingMessage("onebot", f"private:{i}", f"{i} {big}")))
        for i in range(1500)
    ]
    try:
        # 1500 replies of 9 KB owed, unanswered, unread. On a loaded machine queueing them
        # can outlast the action timeout of the catch-up's first call: the stall is then
        # detected (the socket dropped) before all are queued, which is fine too.
        async with asyncio.timeout(60):
            while (len(deaf.pending) < 1500 or deaf.unsent() < STALLED_BYTES) and str(
                DEAF
            ) in channel.self_ids:
                await asyncio.sleep(0.01)
        # The other account's round trips, all along: while the deaf socket's actions wait
        # for answers, when they time out, and while its messages go back to the outbox.
        trips: list[float] = []
        async with asyncio.timeout(30):
            while not all(t.done() for t in owed) or len(trips) < 3:
                started = time.monotonic()
                await sim.group_message(
                    GROUP, ALICE, f"[CQ:at,qq=10001000] /echo ping {len(trips)}"
                )
                action = (await sim.wait_actions(len(trips) + 1, "send_group_msg"))[-1]
                trips.append(time.monotonic() - started)
                assert plain(action["params"]["message"]) == f"ping {len(trips) - 1}"
                await asyncio.sleep(0.1)
        assert max(trips) < 2.0, f"the reading account waited up to {max(trips):.2f} s"
        # The deaf socket is dropped; what it owes waits in the outbox for it: none lost.
        assert str(DEAF) not in channel.self_ids
        await bot.outbox.flush_marks()  # the last echo's mark waits for a write (batched)
        assert _states(bot) == {"pending": 1500, "delivered": len(trips)}
    finally:
        for task in owed:
            task.cancel()
        await sim.close()
        writer.close()
        sock.close()
