"""A second, independent IRC client playing the user: a plain asyncio socket speaking RFC
2812 lines (its own few lines of parsing, not the channel's), recording every line the
server relays to it with its size in bytes."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from tests.channels.irc.ngircd_server import OPER, OPER_PASSWORD


@dataclass(frozen=True, slots=True)
class Line:
    raw: bytes  # as received, with CR LF
    prefix: str
    command: str
    params: list[str]

    @property
    def nick(self) -> str:
        return self.prefix.split("!", 1)[0]


def read_line(raw: bytes) -> Line:
    text = raw.decode("utf-8", errors="strict").rstrip("\r\n")
    prefix = ""
    if text.startswith(":"):
        prefix, _, text = text[1:].partition(" ")
    head, sep, trailing = text.partition(" :")
    words = head.split(" ")
    params = words[1:] + ([trailing] if sep else [])
    return Line(raw, prefix, words[0].upper(), params)


class IrcUser:
    def __init__(self, port: int, nick: str) -> None:
        self.port = port
        self.nick = nick
        self.lines: list[Line] = []
        self._changed = asyncio.Condition()
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def connect(self, password: str = "") -> IrcUser:
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._task = asyncio.create_task(self._read(reader))
        if password:
            await self.send(f"PASS {password}")
        await self.send(f"NICK {self.nick}")
        await self.send(f"USER {self.nick} 0 * :test user")
        await self.wait(lambda line: line.command == "001")
        return self

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await reader.readuntil(b"\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            line = read_line(raw)
            if line.command == "PING":
                await self.send(f"PONG :{line.params[-1]}")
            async with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    async def send(self, text: str) -> None:
        assert self._writer is not None
        self._writer.write(text.encode() + b"\r\n")
        await self._writer.drain()

    async def wait(self, found: Any, timeout: float = 15.0, since: int = 0) -> Line:
        """The first line from `since` for which `found(line)` holds, waited for."""
        async with asyncio.timeout(timeout), self._changed:
            while True:
                for line in self.lines[since:]:
                    if found(line):
                        return line
                await self._changed.wait()

    async def join(self, *channels: str) -> None:
        since = len(self.lines)
        await self.send(f"JOIN {','.join(channels)}")
        for channel in channels:
            await self.wait(
                lambda line, c=channel: line.command == "366" and line.params[1].lower() == c,
                since=since,
            )

    async def say(self, target: str, text: str) -> None:
        await self.send(f"PRIVMSG {target} :{text}")

    async def oper(self) -> None:
        since = len(self.lines)
        await self.send(f"OPER {OPER} {OPER_PASSWORD}")
        await self.wait(lambda line: line.command == "381", since=since)

    async def mode(self, channel: str, flags: str, nick: str) -> None:
        since = len(self.lines)
        await self.send(f"MODE {channel} {flags} {nick}")
        await self.wait(
            lambda line: line.command == "MODE" and line.params[0] == channel, since=since
        )

    async def kill(self, nick: str) -> None:
        await self.send(f"KILL {nick} :test: connection dropped")

    def privmsgs(self, sender: Any, target: str | None = None, since: int = 0) -> list[Line]:
        """PRIVMSGs received from a nick `sender(nick)` accepts (to `target`, when given)."""
        return [
            line
            for line in self.lines[since:]
            if line.command == "PRIVMSG"
            and sender(line.nick)
            and (target is None or line.params[0].lower() == target.lower())
        ]

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await self.send("QUIT :bye")
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
