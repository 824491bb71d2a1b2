"""A /v1/events client that goes away (a page reload, a closed tab) ends its server task
cleanly: no task is left pending behind it, and none is later destroyed pending ("Task was
destroyed but it is pending!", logged on every page reload before)."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

from aiohttp import ClientSession, ClientTimeout

from chatfn.channels.http.channel import HttpChannel
from chatfn.common.messages import OutgoingMessage
from chatfn.testing import TestBot
from tests.kit import until


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_a_closed_event_stream_leaves_no_pending_task(tmp_path: Path) -> None:
    gc.collect()  # what earlier tests of this process left is collected before the log is read
    asyncio_log = Collect()
    logging.getLogger("asyncio").addHandler(asyncio_log)
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    url = f"http://127.0.0.1:{channel.bound_port}/v1/events"
    try:
        async with ClientSession(timeout=ClientTimeout(total=10)) as http:
            for n in range(3):  # three page reloads
                resp = await http.get(url)
                assert await resp.content.readline() == b": connected\n"
                # An event through the live stream: the server task is in its wait for the
                # next one (where a reload finds it) when the client goes.
                await tb.bot.send(OutgoingMessage("http", "private:a", f"event {n}"))
                while b"event " not in await resp.content.readline():
                    pass
                resp.close()
                await until(
                    lambda: not channel._sse_clients, 10, "the server did not see the client go"
                )
        current = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if t is not current and "Queue.get" in repr(t)]
        assert left == []
        gc.collect()
        await asyncio.sleep(0)
        assert not any("Task was destroyed" in line for line in asyncio_log.lines)
    finally:
        logging.getLogger("asyncio").removeHandler(asyncio_log)
        await channel.stop()
        await tb.aclose()
