"""A platform SDK's client that owns its event loop (one taken at import, a `start()` that
blocks it for good), run where it cannot block the bot: on a private loop in a daemon thread.

The thread tells the bot's loop what happens (`tell`; how the link is: `report`, which the
channel shows as up or down) and hands it work (`submit`) only through the loop's
thread-safe calls, so the SDK's thread never touches the bot; `stop()` sets the event `main`
watches and joins the thread. Whatever `main` left running is cancelled when it returns, and
the loop closed.

`sessions` is the connection loop such a link runs: connect (a new SDK client each time),
hold the connection until it is lost or the link stops, close it, and after a failure wait
(the backoff, or the kit's slow retry after refused credentials) before the next try.
`Answers` is for an SDK that calls its handler in a task of its own and then writes the
handler's response: the answer is made on the bot's loop, and the SDK's write, wrapped,
waits for it (without blocking the SDK's loop) and writes what it says.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from loguru import logger

from chatfn.channels.kit import channel as kit_channel
from chatfn.channels.outbound import Backoff
from chatfn.common.messages import CredentialsRefused, Unreachable

__all__ = ["Answers", "LoopThread", "Up"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Up:
    """A connection `sessions` made: what keeps it up while it is (`hold()`, a keepalive;
    cancelled when it ends) and what closes it (`close()`)."""

    hold: Callable[[], Awaitable[None]]
    close: Callable[[], Awaitable[None]]


class LoopThread:
    """`main(self)` run on a new loop in the daemon thread `name` from `start()` (called on the
    bot's loop) until it returns; `prepare(loop)` first, on that thread (to point an SDK's
    module-level loop at it). `label` names the link in its log lines and in what `report`
    tells `channel` (a `kit.Lifecycle`); `refused(detail)` is the sentence for refused
    credentials."""

    def __init__(
        self,
        name: str,
        label: str,
        main: Callable[[LoopThread], Coroutine[Any, Any, None]],
        prepare: Callable[[asyncio.AbstractEventLoop], None] = lambda loop: None,
        channel: kit_channel.Lifecycle | None = None,
        refused: Callable[[str], str] = lambda detail: f"credentials refused ({detail})",
    ) -> None:
        self.name, self.label = name, label
        self._main_coro, self._prepare = main, prepare
        self.channel, self._refused = channel, refused
        self.home: asyncio.AbstractEventLoop | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None  # set by stop(); on the thread's loop
        self._thread: threading.Thread | None = None
        self._started = threading.Event()

    def start(self) -> None:
        self.home = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        if self._thread is None:
            return
        await asyncio.to_thread(self._started.wait, 10)
        if self.loop is not None and self.stopping is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.stopping.set)
        await asyncio.to_thread(self._thread.join, 10)
        self._thread = None

    # -- on the thread ------------------------------------------------------------------------
    def tell(self, call: Callable[..., None], *args: Any) -> None:
        """`call(*args)` on the bot's loop, unless it is gone."""
        if self.home is not None and not self.home.is_closed():
            with contextlib.suppress(RuntimeError):
                self.home.call_soon_threadsafe(call, *args)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """`coro` run on the bot's loop; RuntimeError when that loop is gone."""
        if self.home is None or self.home.is_closed():
            coro.close()
            raise RuntimeError("the bot's loop is gone")
        return asyncio.run_coroutine_threadsafe(coro, self.home)

    def report(self, state: str, detail: str = "") -> None:
        """Tell the channel how the link is: "connected" (up), "refused" (its credentials:
        down with the `refused` sentence), "lost" or "failing" (down: "<label> lost (detail)",
        "<label> failed (detail)")."""
        self.tell(self._report, state, detail)

    def _report(self, state: str, detail: str) -> None:  # on the bot's loop
        if self.channel is None:
            return
        if state == "connected":
            self.channel.up()
        elif state == "refused":
            self.channel.down(CredentialsRefused(self._refused(detail)))
        else:
            what = "lost" if state == "lost" else "failed"
            self.channel.down(Unreachable(f"{self.label} {what} ({detail})"))

    async def sessions(
        self,
        connect: Callable[[asyncio.Event], Awaitable[Up]],
        refused: tuple[type[BaseException], ...],
    ) -> None:
        """Connect, hold, close and again until stopping (module docstring): `connect(lost)`
        raises why it could not (one of `refused`: the credentials), or gives the connection,
        held until the link stops or `lost` is set (the SDK gave up on it). Each failure is
        reported once per try ("refused", or "failing" with the error's type); the channel
        says it once per outage."""
        stopping = self.stopping
        assert stopping is not None
        backoff = Backoff(0.5, 60.0)
        while not stopping.is_set():
            lost = asyncio.Event()
            was_refused = False
            try:
                up = await connect(lost)
            except refused as exc:
                self.report("refused", str(exc))
                was_refused = True
            except Exception as exc:
                self.report("failing", f"{type(exc).__name__}: {exc}")
            else:
                backoff.reset()
                self.report("connected")
                hold = asyncio.ensure_future(up.hold())
                stop = asyncio.ensure_future(stopping.wait())
                gone = asyncio.ensure_future(lost.wait())
                await asyncio.wait([stop, gone], return_when=asyncio.FIRST_COMPLETED)
                for task in (hold, stop, gone):
                    task.cancel()
                with contextlib.suppress(Exception):
                    await up.close()
                if stopping.is_set():
                    return
            if not await self.pause(backoff, was_refused):
                return

    async def pause(self, backoff: Backoff, refused: bool) -> bool:
        """Wait before connecting again (the kit's slow retry after refused credentials: they
        may be fixed meanwhile; else the backoff); False once stopping."""
        assert self.stopping is not None
        if not refused:
            return await backoff.wait(self.stopping)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(kit_channel.REFUSED_RETRY):
                await self.stopping.wait()
        return not self.stopping.is_set()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._prepare(loop)
        # A receive task ends with the closed connection's error when the link is stopped:
        # known, and not worth a traceback.
        loop.set_exception_handler(
            lambda _l, ctx: logger.debug("{}: {}", self.label, ctx.get("message"))
        )
        self.loop, self.stopping = loop, asyncio.Event()
        self._started.set()
        try:
            loop.run_until_complete(self._main_coro(self))
        except Exception as exc:  # never let the thread die silently
            logger.opt(exception=exc).error("{} stopped", self.label)
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()


class Answers(Generic[T]):
    """Answers to the frames an SDK handles each in a task of its own (module docstring): the
    handler, called by the SDK in that task, hands the answer's work to the bot's loop
    (`hand`); the SDK's write of that frame's response (`writing`) waits for it and writes
    `rewrite(data, answer)` instead (`failed` when the work failed: the bot stopping)."""

    def __init__(self, thread: LoopThread, name: str, failed: T) -> None:
        self.thread, self.failed = thread, failed
        self._answer: contextvars.ContextVar[concurrent.futures.Future[T] | None] = (
            contextvars.ContextVar(name, default=None)
        )

    def hand(self, coro: Coroutine[Any, Any, T]) -> None:
        """`coro` run on the bot's loop as the answer of the frame being handled (a bot's
        loop gone raises RuntimeError: the SDK's own failure answer)."""
        self._answer.set(self.thread.submit(coro))

    def writing(
        self,
        write: Callable[[bytes], Awaitable[None]],
        rewrite: Callable[[bytes, T], bytes],
    ) -> Callable[[bytes], Awaitable[None]]:
        """The SDK's `write(data)`, waiting first for the answer of the frame being handled
        (if one was handed) and writing `rewrite(data, answer)`."""

        async def write_when_answered(data: bytes) -> None:
            answer = self._answer.get()
            if answer is not None:
                self._answer.set(None)
                got: T
                try:
                    got = await asyncio.wrap_future(answer)
                except Exception:  # noqa: BLE001 - the bot stopping: `failed`
                    got = self.failed
                data = rewrite(data, got)
            await write(data)

        return write_when_answered
