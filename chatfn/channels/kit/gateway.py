"""A platform's gateway: the WebSocket a channel's events come over, read by an object of its
own for the channel (a gateway class per platform), which it tells when it is up or down
(`Lifecycle`). What every such gateway holds is declared here once: the API that hands out its
URL, the channel's settings, the HTTP session the socket is opened with, where its events go
(`dispatch`), the channel, the session it resumes and the socket it reads now (`HeldSocket`:
closed when the channel stops).

The session loop is here too, the same for every gateway (`run`): ask for the URL, connect,
read the connection (the platform's `read`: hello, identify or resume, its frames) with a
heartbeat beside it (`beating`, `heartbeat`: a beat the platform answers, a dead connection
closed and resumed), then act on why it ended -- the credentials refused (`refusals`: the
channel's error line), a close code that names something to fix (`GiveUp`: one error line, no
more connecting), the platform asking for a new connection (`RECONNECT`: at once after a
session that worked), or a drop (one quick try after a session that worked, then the
backoff). The protocol (hello, identify, resume, sequence numbers, the close-code table, the
beat's frame) is the platform's.

A connection's frames are read the same way too (`follow`): each acted on by its opcode (the
frame's key `op_key`), the beat's answer (`beat_answer`) setting `answered`, any other by the
platform's handler that `ops` names for it, until one says why the connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Coroutine
from typing import Any, ClassVar, Generic, TypeVar

import aiohttp
from loguru import logger

from chatfn.channels.kit.channel import Lifecycle
from chatfn.channels.kit.wire import HeldSocket
from chatfn.channels.outbound import Backoff
from chatfn.common.messages import CredentialsRefused, Unreachable

__all__ = ["RECONNECT", "SLOW_DOWN", "GatewaySocket", "GiveUp"]

A = TypeVar("A")
S = TypeVar("S")
D = TypeVar("D")

#: Why a connection ended, for `run`: the platform asked for a new connection (at once after a
#: session that worked); the platform asked to slow down (the backoff, never the quick retry).
RECONNECT, SLOW_DOWN = "reconnect", "slow down"


class GiveUp(Exception):
    """A close code that names something to fix (a banned bot, intents it may not have): the
    gateway says so in one error line and connects no more until the channel restarts."""


class GatewaySocket(HeldSocket, ABC, Generic[A, S, D]):
    """One gateway session of a channel (module docstring): `api` (A), `cfg` (S), `session`,
    `dispatch` (D), `channel`, `session_id` (None: identify afresh); `run()` until the channel
    stops."""

    #: Names the platform in the lines about its gateway ("<platform> gateway connection lost").
    platform: ClassVar[str] = ""
    #: The platform's errors that mean its credentials were refused, and the operator's line
    #: then (`{}`: the error), naming the setting to fix.
    refusals: ClassVar[tuple[type[Exception], ...]] = ()
    refused: ClassVar[str] = "{}"
    #: The platform's API errors of asking for the URL (`address`), which `where` names.
    api_errors: ClassVar[tuple[type[Exception], ...]] = ()
    where: ClassVar[str] = ""
    #: Seconds of the backoff between connections: the first, and the most.
    backoff_first: ClassVar[float] = 1.0
    backoff_cap: ClassVar[float] = 60.0
    #: The largest frame read (0: any).
    max_msg_size: ClassVar[int] = 4 * 1024 * 1024
    #: A frame's key that holds its opcode; the opcode of the answer to a beat; the name of
    #: the platform's handler of each other opcode (a method, or an async one: the frame in,
    #: why the connection ends out, None to read on); an opcode not named is ignored.
    op_key: ClassVar[str] = "op"
    beat_answer: ClassVar[object] = None
    ops: ClassVar[dict[object, str]] = {}

    def __init__(
        self,
        api: A,
        settings: S,
        session: aiohttp.ClientSession,
        dispatch: D,
        channel: Lifecycle,
    ) -> None:
        self.api = api
        self.cfg = settings
        self.session = session
        self.dispatch = dispatch
        self.channel = channel
        self.session_id: str | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self.backoff = Backoff(self.backoff_first, self.backoff_cap)
        self.opened = False  # the current connection's session is open (events flow)
        self.answered = asyncio.Event()  # the platform answered the last beat
        self.setup()

    def setup(self) -> None:  # noqa: B027 - optional hook
        """The platform's own state of a new gateway (sequence numbers, counters)."""

    @abstractmethod
    async def address(self) -> str:
        """The URL to connect to now (asked of the API; with resume parameters if resuming)."""

    def url_in(self, found: Any) -> str:
        """The `url` of the answer `found` to asking for it (`where`); ValueError if none."""
        url = str(found.get("url") or "") if isinstance(found, dict) else ""
        if not url:
            raise ValueError(f"{self.where} gave no url")
        return url

    @abstractmethod
    async def read(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """One connection: hello, identify or resume, its frames; why it ended (`RECONNECT`,
        `SLOW_DOWN` or what the connection-lost line says). Raise `GiveUp` to stop."""

    @abstractmethod
    def beat(self) -> dict[str, Any]:
        """The heartbeat's frame (what the platform answers with a frame that sets
        `answered`)."""

    def open(self) -> None:
        """The session is open (identified or resumed): the backoff starts again, the channel
        is up."""
        self.opened = True
        self.backoff.reset()
        self.channel.up()

    async def run(self) -> None:
        """Connect, read, connect again (module docstring) until the channel stops."""
        while not self.channel.stopping:
            worked, self.opened = self.opened, False
            why = await self._connect_once()
            if why is None or self.channel.stopping:
                return
            if why == RECONNECT:
                # asked for: at once after a session that worked, else not faster than the
                # backoff (a resume refused at hello)
                if self.opened or await self.channel.pause(self.backoff.next_delay()):
                    continue
                return
            self.lost(why)
            lost = Unreachable(f"{self.platform} gateway connection lost ({why})")
            if (self.opened or worked) and why != SLOW_DOWN:
                # it worked until now: try again after a moment, then back off
                self.opened = False
                self.channel.down(lost)
                if not await self.channel.pause(0.1):
                    return
            elif not await self.channel.failed(lost, self.backoff):
                return

    async def follow(self, frames: AsyncIterable[dict[str, Any]]) -> str | None:
        """Act on each of `frames` (module docstring) until a handler says why the connection
        ends; None when the frames end (the socket closed)."""
        async for payload in frames:
            why = await self.signal(payload)
            if why is not None:
                return why
        return None

    async def signal(self, payload: dict[str, Any]) -> str | None:
        """One frame acted on by its opcode; why the connection ends, or None."""
        op = payload.get(self.op_key)
        if op is not None and op == self.beat_answer:
            self.answered.set()
            return None
        handler = self.ops.get(op)
        why = None if handler is None else getattr(self, handler)(payload)
        return await why if inspect.isawaitable(why) else why

    def lost(self, why: str) -> None:  # noqa: B027 - optional hook
        """A connection ended by a drop or a refusal (not asked for): the platform's count of
        failed resumes, say."""

    async def _connect_once(self) -> str | None:
        """One connection; why it ended, or None once given up (parked until the channel
        stops)."""
        try:
            url = await self.address()
            async with self.session.ws_connect(
                url, autoping=True, max_msg_size=self.max_msg_size
            ) as ws:
                self._ws = ws
                return await self.read(ws)
        except self.refusals as exc:
            raise CredentialsRefused(self.refused.format(exc)) from None
        except GiveUp as exc:
            # one error line (health shows it), then nothing more until the bot restarts
            self.channel.down(CredentialsRefused(f"{exc}; not reconnecting"))
            while await self.channel.pause(3600):
                pass
            return None
        except self.api_errors as exc:
            return f"{self.where}: {exc}"
        except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError, TypeError) as exc:
            # TypeError: a close or binary frame where a JSON text frame belongs
            return f"{type(exc).__name__}: {exc}"
        finally:
            self._ws = None

    async def heartbeat(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        every: float,
        within: float,
        jitter: float = 0.0,
        retries: tuple[float, ...] = (),
    ) -> None:
        """Send `beat()` every `every` seconds (+-`jitter`); one not answered `within` seconds
        (nor any of the beats sent again, each waited on its `retries` seconds) is a dead
        connection: closed, and resumed."""
        while not ws.closed:
            await asyncio.sleep(max(0.05, every + random.uniform(-jitter, jitter)))  # noqa: S311
            for wait in (within, *retries):
                if await self._beat(ws, wait):
                    break
            else:
                logger.warning("{} gateway: heartbeat not answered: resuming", self.platform)
                await ws.close(code=4000)
                return

    async def _beat(self, ws: aiohttp.ClientWebSocketResponse, wait: float) -> bool:
        self.answered.clear()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_json(self.beat())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self.answered.wait()
                return True
        return False

    @contextlib.asynccontextmanager
    async def beating(self, heartbeat: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
        """Run `heartbeat` (the platform's pings on the open socket) while the block reads the
        connection; it is stopped when the block ends, however it ends."""
        beat = asyncio.ensure_future(heartbeat)
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
