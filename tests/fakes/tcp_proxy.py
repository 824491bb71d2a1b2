"""A TCP proxy for outage tests: the bot connects to it instead of PostgreSQL or RabbitMQ, and
a test cuts and restores the service without touching the real one (shared by everyone on
the machine).

    proxy = TcpProxy("127.0.0.1", 5432).start()   # listens on 127.0.0.1:<proxy.port>
    proxy.cut()       # every open connection is dropped, new ones are refused
    proxy.restore()   # connections are accepted again
    proxy.hold()      # bytes from the service to its clients are kept back ...
    proxy.release()   # ... and forwarded now: a client stalled mid-transaction
    proxy.close()

It runs its own asyncio loop on a daemon thread, so a synchronous test (subprocesses, sleeps on
conditions) drives it with plain calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

CHUNK = 65536


class _Pipe:
    """One client connection and its connection to the service."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream
        self.held: list[bytes] = []  # service -> client bytes kept back by `hold()`

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            transport = writer.transport
            sock = transport.get_extra_info("socket")
            if sock is not None:  # RST, not FIN: as a connection torn down by the network
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                except OSError:
                    pass
            transport.abort()


class TcpProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.connections = 0  # accepted while up, for tests that want to see traffic
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._pipes: set[_Pipe] = set()
        self._up = True
        self._holding = False

    # -- control (from the test's thread) ---------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._listen)
        return self

    def cut(self) -> None:
        """Drop every connection (RST) and refuse new ones until `restore()`."""
        self._call(self._cut)

    def restore(self) -> None:
        self._call(self._restore)

    def hold(self) -> None:
        """Keep back what the service sends to its clients (their requests still reach it):
        a client waiting for an answer stalls, e.g. inside a transaction the service already
        executed."""
        self._call(self._set_holding, True)

    def release(self) -> None:
        """Forward what `hold()` kept back, and stop holding."""
        self._call(self._set_holding, False)

    def held_bytes(self) -> int:
        return self._call(self._held_bytes)

    def open_connections(self) -> int:
        return self._call(self._open_connections)

    def close(self) -> None:
        self._call(self._close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(fn(*args), self._loop).result(10)

    # -- on the proxy's loop ------------------------------------------------------------------
    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        self._up = False
        for pipe in list(self._pipes):
            pipe.abort()
        self._pipes.clear()

    async def _restore(self) -> None:
        self._up = True

    async def _set_holding(self, holding: bool) -> None:
        self._holding = holding
        if not holding:
            for pipe in self._pipes:
                for chunk in pipe.held:
                    pipe.client.write(chunk)
                pipe.held.clear()

    async def _held_bytes(self) -> int:
        return sum(len(c) for p in self._pipes for c in p.held)

    async def _open_connections(self) -> int:
        return len(self._pipes)

    async def _close(self) -> None:
        await self._cut()
        if self._server is not None:
            self._server.close()
        # The connections' tasks end here (their transports were aborted: they finish on the
        # loop's next turns), not pending in a stopped loop: collected later they would log
        # "Task was destroyed but it is pending!" into whichever test runs then
        # (tests/channels/http/test_sse_close.py asserts there is none).
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._up:  # refused: reset at once
            _Pipe(writer, writer).abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _Pipe(writer, writer).abort()
            return
        pipe = _Pipe(writer, up_writer)
        self._pipes.add(pipe)
        self.connections += 1
        await asyncio.gather(
            self._forward(reader, up_writer, pipe, to_client=False),
            self._forward(up_reader, writer, pipe, to_client=True),
            return_exceptions=True,
        )
        if pipe in self._pipes:
            self._pipes.discard(pipe)
            for w in (writer, up_writer):
                w.close()

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pipe: _Pipe,
        *,
        to_client: bool,
    ) -> None:
        try:
            while chunk := await reader.read(CHUNK):
                if to_client and self._holding:
                    pipe.held.append(chunk)
                    continue
                writer.write(chunk)
                await writer.drain()
            if to_client:  # the service closed: its last words are held back too
                while self._holding and pipe in self._pipes:
                    await asyncio.sleep(0.02)
        finally:
            if pipe in self._pipes:  # one side closed: close the other (a normal goodbye)
                with contextlib.suppress(Exception):
                    writer.write_eof()
