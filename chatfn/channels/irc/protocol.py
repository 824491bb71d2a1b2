"""IRC's wire format (RFC 1459 / RFC 2812 messages, IRCv3 message tags) on asyncio streams.

A line is `[@tags ][:prefix ]COMMAND params [:trailing]` ending in CR LF, at most 512 bytes
with the CR LF (tags not counted: IRCv3 message-tags). `parse` reads one (None for a line
that is not a message), `line` writes one and refuses what cannot be sent (CR, LF or NUL in
a parameter, a space in a middle one, more than 510 bytes). `Connection` is one client
connection: lines in, lines out, every line out paced by a token bucket so the server's
flood control never cuts the bot off (most servers allow a few lines at once, then about
one a second; ngircd handles three commands a second and queues the rest).

Written here rather than taken from a library: the protocol the bot needs is small, and the
asyncio IRC libraries are not kept up (pydle's last release is from 2022 and does not run on
Python 3.12's asyncio; bottom has had no release since 2019; jaraco's `irc` is threads and
callbacks first).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from chatfn.channels.outbound import RateLimiter

__all__ = ["MAX_LINE", "Connection", "Message", "line", "parse"]

#: Bytes of one line with its CR LF (RFC 2812 section 2.3).
MAX_LINE = 512
_FORBIDDEN = ("\r", "\n", "\0")


@dataclass(frozen=True, slots=True)
class Message:
    """One message read: `prefix` the sender (`nick!user@host` or a server name)."""

    command: str
    params: tuple[str, ...] = ()
    prefix: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def nick(self) -> str:
        return self.prefix.split("!", 1)[0]

    def param(self, index: int) -> str:
        return self.params[index] if len(self.params) > index else ""


def _tags(raw: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in raw.split(";"):
        key, _, value = item.partition("=")
        if key:
            found[key] = value.replace("\\:", ";").replace("\\s", " ").replace("\\\\", "\\")
    return found


def parse(raw: str) -> Message | None:
    """One line (without its CR LF) as a Message; None when it holds no command."""
    raw = raw.rstrip("\r\n")
    tags: dict[str, str] = {}
    if raw.startswith("@"):
        head, _, raw = raw.partition(" ")
        tags = _tags(head[1:])
    prefix = ""
    if raw.startswith(":"):
        head, _, raw = raw.partition(" ")
        prefix = head[1:]
    raw = raw.lstrip(" ")
    trailing: str | None = None
    if " :" in raw:
        raw, trailing = raw.split(" :", 1)
    elif raw.startswith(":"):
        raw, trailing = "", raw[1:]
    words = raw.split()
    if not words:
        return None
    params = words[1:] + ([trailing] if trailing is not None else [])
    return Message(words[0].upper(), tuple(params), prefix, tags)


def line(command: str, *params: str) -> str:
    """The line (without CR LF) of `command` and `params`, the last one trailing; ValueError
    for a parameter IRC cannot carry or a line over 510 bytes."""
    for p in params:
        if any(c in p for c in _FORBIDDEN):
            raise ValueError("an IRC parameter cannot hold CR, LF or NUL")
    for p in params[:-1]:
        if not p or " " in p or p.startswith(":"):
            raise ValueError(f"not a middle IRC parameter: {p!r}")
    parts = [command, *params[:-1]]
    if params:
        last = params[-1]
        parts.append(f":{last}" if not last or " " in last or last.startswith(":") else last)
    text = " ".join(parts)
    if len(text.encode()) > MAX_LINE - 2:
        raise ValueError(f"an IRC line is at most {MAX_LINE} bytes with CR LF")
    return text


class Connection:
    """One connection to an IRC server: `send` (paced: `rate` lines a second after `burst`),
    `read` (None at the end), `close`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        rate: float = 1.0,
        burst: int = 4,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.pace = RateLimiter(rate, burst)
        self._lock = asyncio.Lock()
        self.closed = False

    @classmethod
    async def open(
        cls, host: str, port: int, *, tls: bool, timeout: float, rate: float, burst: int
    ) -> Connection:
        context = ssl.create_default_context() if tls else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context, limit=64 * 1024), timeout
        )
        return cls(reader, writer, rate, burst)

    async def send(self, command: str, *params: str, paced: bool = True) -> None:
        """Write one line (ValueError: see `line`); ConnectionError once closed."""
        text = line(command, *params)
        async with self._lock:  # one writer at a time, in the order the pace allows
            if paced:
                await self.pace.acquire("connection")
            if self.closed or self.writer.is_closing():
                raise ConnectionError("the IRC connection is closed")
            self.writer.write(text.encode() + b"\r\n")
            await self.writer.drain()

    async def read(self) -> Message | None:
        """The next message; None when the server closed the connection."""
        while True:
            try:
                raw = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return None
            except asyncio.LimitOverrunError:  # a line far past 512 bytes: drop it
                await self.reader.read(64 * 1024)
                continue
            found = parse(raw.decode("utf-8", errors="replace"))
            if found is not None:
                return found

    async def close(self) -> None:
        self.closed = True
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except (OSError, TimeoutError, ssl.SSLError):
            pass
