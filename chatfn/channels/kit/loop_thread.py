"""A platform SDK's client that owns its event loop (one taken at import, a `start()` that
blocks it for good), run where it cannot block the bot: on a private loop in a daemon thread.

The thread tells the bot's loop what happens (`tell`) and hands it work (`submit`) only
through the loop's thread-safe calls, so the SDK's thread never touches the bot; `stop()`
sets the event `main` watches and joins the thread. Whatever `main` left running is
cancelled when it returns, and the loop closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from loguru import logger

from chatfn.channels.kit import channel as kit_channel
from chatfn.channels.outbound import Backoff

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """`main(self)` run on a new loop in the daemon thread `name` from `start()` (called on the
    bot's loop) until it returns; `prepare(loop)` first, on that thread (to point an SDK's
    module-level loop at it). `label` names the link in its log lines."""

    def __init__(
        self,
        name: str,
        label: str,
        main: Callable[[LoopThread], Coroutine[Any, Any, None]],
        prepare: Callable[[asyncio.AbstractEventLoop], None] = lambda loop: None,
    ) -> None:
        self.name, self.label = name, label
        self._main_coro, self._prepare = main, prepare
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
