"""The Matrix channel under the HTTP channel's load, against a real Synapse: 1000 messages,
`--concurrency` in flight, answered by a scripted echo model (no model latency), so what is
measured is the channel's cost plus the homeserver's: the person's send, Synapse persisting it
and waking the bot's /sync long poll, matrix-nio parsing the sync, the stored-message check,
and the reply's PUT /send with its transaction id.

Synapse (matrix-synapse, the test extra; tests/channels/matrix/synapse_server.py: SQLite in memory,
rate limits relaxed) runs as its own process; the load generator and the bot share this one.
Messages go round-robin over `--rooms` direct chats (default 100: a Synapse room costs about a
tenth of a second to make, so 1000 rooms would mostly measure room creation, which happens
before the clock starts), at most one message in flight per room, each room with its own
person. Latency: from the person's PUT /send to the bot's reply reaching the homeserver (seen
by a pass-through proxy in front of the bot, tests/channels/matrix/matrix_proxy.py).

Contenders, on a real SQLite file each:
  http    POST /v1/messages to the HTTP channel; latency = request to response.
  matrix  as above. "Added" is matrix's p50/p95 minus http's.

Run: `python bench/bench_channel_matrix.py` (about a minute); `--messages`, `--concurrency`,
`--rooms`, `--json`.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from bench.channel_load import main, make_bot, summary  # noqa: E402
from chatfn.runtime.channel_registry import find_channels  # noqa: E402
from tests.channels.matrix.matrix_proxy import _SEND, MatrixProxy  # noqa: E402
from tests.channels.matrix.synapse_server import Account, Synapse  # noqa: E402

ROOMS = 100
for i, arg in enumerate(sys.argv):
    if arg == "--rooms" and i + 1 < len(sys.argv):
        ROOMS = int(sys.argv[i + 1])
        del sys.argv[i : i + 2]
        break


class _Watch(MatrixProxy):
    """The proxy, telling the bench when the bot's reply to a room reaches the homeserver."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.waiting: dict[str, asyncio.Future[None]] = {}

    async def _pass(self, request: Any) -> Any:
        response = await super()._pass(request)
        send = _SEND.match(request.path) if request.method == "PUT" else None
        if send is not None:
            future = self.waiting.pop(unquote(send.group(1)), None)
            if future is not None and not future.done():
                future.set_result(None)
        return response


async def _rooms(synapse: Synapse, bot: Account, count: int) -> list[tuple[str, str]]:
    """(room id, the person's token) of `count` direct chats the bot has joined."""
    tag = uuid.uuid4().hex[:6]
    people = await asyncio.gather(
        *(asyncio.to_thread(synapse.register, f"p{i}-{tag}") for i in range(count))
    )
    made: list[tuple[str, str]] = []
    async with aiohttp.ClientSession() as http:

        async def one(person: Account) -> None:
            head = {"Authorization": f"Bearer {person.access_token}"}
            body = {"is_direct": True, "invite": [bot.user_id], "preset": "trusted_private_chat"}
            async with http.post(
                f"{synapse.url}/_matrix/client/v3/createRoom", json=body, headers=head
            ) as r:
                made.append(((await r.json())["room_id"], person.access_token))

        gate = asyncio.Semaphore(8)

        async def gated(person: Account) -> None:
            async with gate:
                await one(person)

        await asyncio.gather(*(gated(p) for p in people))
    return made


async def _joined(synapse: Synapse, bot: Account, rooms: list[tuple[str, str]]) -> None:
    wanted = {room for room, _ in rooms}
    async with aiohttp.ClientSession() as http:
        async with asyncio.timeout(300):
            while True:
                async with http.get(
                    f"{synapse.url}/_matrix/client/v3/joined_rooms",
                    headers={"Authorization": f"Bearer {bot.access_token}"},
                ) as r:
                    if wanted <= set((await r.json())["joined_rooms"]):
                        return
                await asyncio.sleep(0.2)


async def bench_matrix(n: int, concurrency: int, folder: Path) -> dict[str, float]:
    synapse = Synapse(folder / "synapse")
    await asyncio.to_thread(synapse.start)
    try:
        bot_account = await asyncio.to_thread(synapse.register, "benchbot")
        async with _Watch(synapse.url) as proxy:
            settings = {
                "homeserver": proxy.url,
                "user_id": bot_account.user_id,
                "access_token": bot_account.access_token,
                "device_id": bot_account.device_id,
                "store_path": str(folder / "store"),
                "send_rate": 0,
            }
            bot = make_bot(folder, {"matrix": settings})
            channel = find_channels().get("matrix").build(bot.channel_host)
            task = asyncio.create_task(channel.run())
            await channel.wait_ready()
            await bot.start()
            rooms = await _rooms(synapse, bot_account, min(ROOMS, n))
            await _joined(synapse, bot_account, rooms)
            free: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
            for room in rooms:
                free.put_nowait(room)
            gate = asyncio.Semaphore(concurrency)
            latencies: list[float] = []
            sent_before = len(proxy.sends)
            async with aiohttp.ClientSession() as http:

                async def one(i: int) -> None:
                    async with gate:
                        room, token = await free.get()
                        future = asyncio.get_running_loop().create_future()
                        proxy.waiting[room] = future
                        url = (
                            f"{synapse.url}/_matrix/client/v3/rooms/{room}/send/"
                            f"m.room.message/bench{i}"
                        )
                        began = time.perf_counter()
                        async with http.put(
                            url,
                            json={"msgtype": "m.text", "body": f"ping {i}"},
                            headers={"Authorization": f"Bearer {token}"},
                        ) as r:
                            assert r.status == 200, await r.text()
                        await future
                        latencies.append(time.perf_counter() - began)
                        free.put_nowait((room, token))

                began = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(1, n + 1)))
                wall = time.perf_counter() - began
            txns = [t for _room, t in proxy.sends[sent_before:]]
            await channel.stop()
            await task
            await bot.aclose()
    finally:
        synapse.stop()
    result = summary(latencies, wall)
    result["duplicates"] = len(txns) - len(set(txns))
    return result


if __name__ == "__main__":
    asyncio.run(main("matrix", bench_matrix, __doc__ or ""))
