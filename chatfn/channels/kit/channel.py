"""The channel kit's template: what every platform channel does, written once.

A platform writes what is its own:

- `connect()`: log in / "who am I"; raise `CredentialsRefused` (its text is the operator's one
  line, naming the setting) or `Unreachable`;
- `serve()`: read events until the channel stops (the default, for a platform whose events
  come by webhook: say it is up, then wait; for one connection that `connect` opens,
  `serve_sessions`: read it, and connect again in place when it ends; for a socket of its
  own after logging in, `serve_socket`: read it, and open it again when it drops; for one
  read by asking again and again, a long poll or a sync, `serve_polls`); raise
  `CredentialsRefused` when the platform refuses the credentials while serving (a token
  revoked);
- parse: turn an event into an `IncomingMessage` or a system event, handed to `self.inbound`
  (inbound.py: per-chat order, confirm once stored);
- `deliver(message)`: send one outbox delivery (a `PlatformSender`, sender.py), raising the
  kit's errors (errors.py);
- `close()`: release what connect and serve opened.

The kit owns the rest, as NoneBot2's `Adapter` and aiogram's `Dispatcher._listen_updates` do:
`run()` connects in one loop (credentials refused: one clear line, the channel shown as down
in /healthz and the console, a retry every `REFUSED_RETRY` seconds; network errors: one line
per outage, backoff to a cap), then serves; refused credentials while serving go back to that
loop. The rest of the bot runs on whatever one channel does. `stop()` cancels the tracked
tasks and closes. `send()` refuses with NotDelivered until the first connect (the outbox
keeps the message).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from loguru import logger
from pydantic import BaseModel

from chatfn.channels.base import Channel
from chatfn.channels.kit.inbound import Inbound
from chatfn.channels.kit.incoming import incoming
from chatfn.channels.kit.sender import PlatformSender
from chatfn.channels.outbound import Backoff
from chatfn.common.config import ConfigError
from chatfn.common.messages import (
    CredentialsRefused,
    IncomingMessage,
    NotDelivered,
    OutgoingMessage,
    RateLimited,
    Unreachable,
)
from chatfn.runtime.channel_host import ChannelHost, DeliveryPolicy

__all__ = ["REFUSED_RETRY", "Lifecycle", "PlatformChannel", "SessionChannel"]

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")

#: Seconds between tries while the platform refuses the credentials (they may be fixed).
REFUSED_RETRY = 60.0


class GroupOrNot(Protocol):
    """A chat reference that knows its chat id and whether it is a group."""

    @property
    def key(self) -> str: ...

    @property
    def is_group(self) -> bool: ...


class Lifecycle(Protocol):
    """What a connection the channel hands its reading to (a gateway's socket) tells the
    channel: a `PlatformChannel` is one; a test may give a stand-in."""

    @property
    def stopping(self) -> bool: ...

    def up(self) -> None: ...

    def down(self, why: Exception) -> None: ...

    async def failed(self, why: Exception, backoff: Backoff) -> bool: ...

    async def pause(self, seconds: float) -> bool: ...


class PlatformChannel(Channel, Generic[S]):
    """A platform channel on the kit (module docstring)."""

    #: The platform's name in log lines (its proper spelling, beside `platform`, the id).
    label: ClassVar[str] = ""
    #: Whether a message whose id is in the history already is skipped (a platform that
    #: delivers a message again after a restart; not one that reads it back itself).
    skip_stored: ClassVar[bool] = True
    #: The way out, when the platform's is a kit sender (`deliver` goes through it).
    sender: PlatformSender[Any] | None = None

    def __init_subclass__(cls, platform: str = "", label: str = "", **kw: Any) -> None:
        """`class XChannel(PlatformChannel[XSettings], platform="x", label="X")`."""
        super().__init_subclass__(**kw)
        cls.platform, cls.label = platform or cls.platform, label or cls.label

    def __init__(self, host: ChannelHost, settings: S) -> None:
        problem = getattr(settings, "problem", None)
        if callable(problem) and (why := problem()):  # a token not set: refused before it runs
            raise ConfigError(why)
        super().__init__(host)
        self.cfg = settings
        # A test's host may have no policy: the defaults then.
        policy = getattr(host, "delivery_policy", None) or DeliveryPolicy()
        self.policy = policy.override(self.platform, getattr(settings, "max_retry_after", None))
        # Its lines carry the platform's module name, as if the platform had written them.
        self.log = logger.patch(lambda r: r.update({"name": type(self).__module__}))
        self.inbound = Inbound(self)
        self.logged_in = False  # connect() succeeded once: sends may go
        self.connected = False  # up now (health)
        self.status = "connecting"  # what health shows beside it: why it is down
        self.connect_attempts = 0  # tests, health
        self.refusals = 0  # times the platform refused the credentials (tests, health)
        self._told: str | None = None  # the kind of failure logged for this outage
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = asyncio.Event()
        self._ready = asyncio.Event()
        self._stopped = False

    # -- what a platform writes ------------------------------------------------------------
    @abstractmethod
    async def connect(self) -> str | None:
        """Log in and learn who the bot is (what it says, logged: "@bot (id 7), polling");
        raise CredentialsRefused or Unreachable."""

    #: Events by webhook: seconds between credential checks while serving (None: none). A
    #: webhook channel has no connection that fails when its token is revoked, so it calls
    #: `connect` again every `keepalive` seconds: refused credentials end `serve` (the connect
    #: loop takes over, the channel shown down), an unreachable platform marks it down until
    #: the next check answers.
    keepalive: float | None = None

    async def serve(self) -> None:
        """Read events until the channel stops. By default (events by webhook, served by the
        web server): up, then the `keepalive` checks, or wait."""
        self.up()
        if self.keepalive is None:
            await self._stopping.wait()
            return
        while await self.pause(self.keepalive):
            try:
                await self.connect()
            except CredentialsRefused:
                raise
            except Unreachable as exc:
                self.down(exc)
                continue
            self.up()

    async def serve_sessions(self, session: Callable[[Backoff], Awaitable[Exception]]) -> None:
        """A `serve` for a platform read over one connection that `connect` opens (a mailbox,
        a chat protocol's stream): `session(backoff)` reads until that connection ends and returns
        why (resetting `backoff` once it is up); then the channel is down for the backoff's
        delay and connects again in place, until it stops. Refused credentials on the way
        back are raised: the kit's connect loop takes over."""
        backoff = Backoff(0.5, 60.0)
        while True:
            why = await session(backoff)
            if self.stopping or not await self.failed(why, backoff):
                return
            if not await self.retrying(self.connect, backoff):
                return

    async def serve_socket(
        self,
        socket: Callable[[], Awaitable[None]],
        errors: tuple[type[BaseException], ...],
        where: str,
    ) -> None:
        """A `serve` for a platform whose events come over a socket the channel opens itself
        after `connect` logged in (a WebSocket): `socket()` reads one until it closes; one
        that fails with one of `errors` marks the channel down (`where` and the error), and
        the socket is opened again after the backoff (reset by a socket that ended cleanly)
        until the channel stops. Refused credentials go back to the kit's connect loop."""
        backoff = Backoff(0.5, 60.0)
        while not self.stopping:
            try:
                await socket()
                backoff.reset()
            except CredentialsRefused:
                raise
            except errors as exc:
                self.down(Unreachable(f"{where}: {exc!r}"))
            if not await self.pause(backoff.next_delay()):
                return

    async def serve_polls(
        self,
        fetch: Callable[[], Awaitable[T]],
        handle: Callable[[T], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        """A `serve` for a platform read by asking again and again (a long poll, a sync, a
        socket opened and read until it ends), written once so each such platform does not
        keep its own copy of the loop: `fetch()` asks once and returns what came, handed to
        `handle`; it raises `Unreachable` (the platform's network error, in the words to log)
        for a passing failure: the channel is down, and asks again after the backoff's delay
        (0.5 s doubling to 30 s unless `backoff` is given); `RateLimited` with a
        `retry_after` when the platform asks to wait: asked again after that wait, not down.
        The first fetch that works after failures puts the channel up; the backoff starts
        over then, and at a failure while up (a socket that said hello, then dropped).
        Refused credentials are raised: the kit's connect loop takes over."""
        backoff = backoff or Backoff(0.5, 30.0)
        while not self.stopping:
            try:
                got = await fetch()
            except CredentialsRefused:
                raise
            except NotDelivered as exc:
                if isinstance(exc, RateLimited) and exc.retry_after is not None:
                    if not await self.pause(exc.retry_after):  # asked to wait: not down
                        return
                    continue
                if self.connected:  # it was up: the backoff starts over
                    backoff.reset()
                if self.stopping or not await self.failed(exc, backoff):
                    return
                continue
            if self.stopping:
                return
            if not self.connected:  # it works again
                backoff.reset()
                self.up()
            if handle is not None:
                handle(got)

    async def retrying(
        self, op: Callable[[], Awaitable[Any]], backoff: Backoff | None = None
    ) -> bool:
        """Call `op` until it works (a platform's setting made at start-up, a connect): each
        `NotDelivered` it raises marks the channel down for the backoff's delay (0.5 s doubling
        to 60 s unless `backoff` is given); refused credentials are raised. True once it
        worked, False if the channel stops first."""
        backoff = backoff or Backoff(0.5, 60.0)
        while not self.stopping:
            try:
                await op()
                return True
            except CredentialsRefused:
                raise
            except NotDelivered as exc:
                if not await self.failed(exc, backoff):
                    return False
        return False

    async def deliver(self, message: OutgoingMessage) -> None:
        """Send one message (an outbox delivery or a reply): by default through `sender`."""
        if self.sender is None:
            raise NotDelivered(f"the {self.label} channel is not connected yet")
        await self.sender.deliver(message)

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release what connect and serve opened (sessions, sockets, clients)."""

    # -- lifecycle -------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while await self._connect():
                # A task (stop cancels it); what it raises is this loop's to handle.
                serving = asyncio.ensure_future(self.serve())
                self._tasks.add(serving)
                serving.add_done_callback(self._tasks.discard)
                try:
                    await serving
                    return
                except CredentialsRefused as exc:  # revoked while serving: connect again
                    if not await self.failed(exc, Backoff()):
                        return
                except asyncio.CancelledError:
                    if not self._stopping.is_set():
                        raise
                    return
        finally:
            await self.stop()

    async def _connect(self) -> bool:
        backoff = Backoff(0.5, 60.0)
        while not self._stopping.is_set():
            self.connect_attempts += 1
            try:
                said = await self.connect()
            except NotDelivered as exc:  # refused, unreachable, or another passing failure
                if not await self.failed(exc, backoff):
                    return False
                continue
            if said:
                self.log.info("{} channel: {}", self.label, said)
            self.logged_in = True
            return True
        return False

    async def stop(self) -> None:
        """Stop serving, cancel the tracked tasks, close; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self.connected = False
        self.status = "stopped"
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.close()

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Until connected and events flow (tests, start-up order)."""
        async with asyncio.timeout(timeout):
            await self._ready.wait()

    # -- up and down -----------------------------------------------------------------------
    def up(self) -> None:
        """Connected and events flow: health shows it; what waited in the outbox goes now."""
        if self._told is not None and self._ready.is_set():
            self.log.info("{} channel is back", self.label)
        self._told = None
        self.connected, self.status = True, "up"
        self._ready.set()
        self.host.kick()

    def down(self, why: Exception) -> None:
        """Down, for `why`: one line per outage and kind (refused credentials: an error whose
        text names the setting to fix; anything else: a warning), shown in health."""
        kind = "refused" if isinstance(why, CredentialsRefused) else "failing"
        self.refusals += kind == "refused"
        if self._told != kind:
            if kind == "refused":
                self.log.error("{}", why)
            else:
                self.log.warning("{}: retrying", why)
            self._told = kind
        self.connected, self.status = False, f"down: {why}"

    async def failed(self, why: Exception, backoff: Backoff) -> bool:
        """A failure of connecting or of a read loop: down, then wait (refused credentials:
        `REFUSED_RETRY`; anything else: the backoff's next delay). False once stopping."""
        self.down(why)
        refused = isinstance(why, CredentialsRefused)
        return await self.pause(REFUSED_RETRY if refused else backoff.next_delay())

    async def pause(self, seconds: float) -> bool:
        """Sleep unless stopping; False once the channel stops."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        return not self._stopping.is_set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    # -- tasks -----------------------------------------------------------------------------
    def spawn(self, job: Awaitable[T]) -> asyncio.Future[T]:
        """Run `job` as a task the channel cancels when it stops."""
        task = asyncio.ensure_future(job)
        self.track(task)
        return task

    def track(self, task: asyncio.Future[Any]) -> None:
        """Keep a reference (the task is not garbage-collected), cancel it on stop, and log
        what it raised instead of leaving it to "exception was never retrieved"."""
        self._tasks.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.opt(exception=task.exception()).error("{} task failed", self.label)

    async def quietly(self, *closing: Awaitable[Any] | None) -> None:
        """Await each of `closing` (a client's close), a failure a debug line: closing goes on."""
        for job in closing:
            if job is not None:
                try:
                    await job
                except Exception as exc:  # noqa: BLE001 - closing: nothing more to do
                    self.log.debug("{}: closing: {!r}", self.label, exc)

    def kick_after(self, seconds: float) -> None:
        """Ask the outbox to send again after `seconds` (a platform's wait has passed)."""
        if not self.stopping:
            asyncio.get_running_loop().call_later(seconds + 0.05, self.host.kick)

    # -- in and out ------------------------------------------------------------------------
    def incoming(
        self, chat_id: str | GroupOrNot, sender_id: str, text: str, **fields: Any
    ) -> IncomingMessage | None:
        """A user's message of this platform, cleaned the one way (kit/incoming.py); None
        when it says nothing. `chat_id` may be the chat's reference: its `key`, and whether
        it is a group (`is_group`)."""
        if not isinstance(chat_id, str):
            fields = {"is_group": chat_id.is_group, **fields}
        key = chat_id if isinstance(chat_id, str) else chat_id.key
        return incoming(self.platform, self.label, key, sender_id, text, **fields)

    async def send(self, message: OutgoingMessage) -> None:
        if not self.logged_in:
            raise NotDelivered(f"the {self.label} channel is not connected yet")
        await self.deliver(message)


class SessionChannel(PlatformChannel[S]):
    """A platform read over the one connection `connect` opens (a mailbox, a chat protocol's
    stream): its `serve` is `serve_sessions(self.session)`, so such a channel writes only
    what one connection's reading is."""

    async def serve(self) -> None:
        await self.serve_sessions(self.session)

    @abstractmethod
    async def session(self, backoff: Backoff) -> Exception:
        """Read the connection `connect` opened until it ends (reset `backoff` once it is up);
        return why it ended."""
