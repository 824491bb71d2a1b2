"""The storage threads: where every database statement of a running bot is executed
(`Storage.run`), off the event loop.

Why not `loop.run_in_executor` on a ThreadPoolExecutor: a hop through it chains a
concurrent.futures.Future to an asyncio one (`wrap_future`, callbacks on both sides, a state
copy), and on the pipeline benchmark that machinery was 0.15-0.2 CPU ms of a message's three
hops (bench/README.md, "Follow-up ... one storage thread on SQLite"). Here a job carries the
loop's own future, and the thread settles it with one `call_soon_threadsafe`. The rest keeps
the executor's behaviour: threads are started as work needs them, up to `size`; a job whose
caller was cancelled before a thread took it is not run; `shutdown` lets the queued jobs
finish; a process that exits without it still lets them finish (`_at_exit`).

Group commit (`grouper`, SQLite's storage thread: `Storage._run_group`): a thread that takes a
job marked `grouped` also takes the grouped jobs queued behind it, at most `GROUP_MAX`, without
waiting for more (a lone job is run at once: the bound on a commit's wait for its group is zero),
and hands them to `grouper` together: one transaction and one commit for all of them. Each
caller's future is settled only after that commit (or after its own, when the group failed and
its members were run again one by one). A job not marked grouped ends the group and runs next,
in queue order.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

R = TypeVar("R")

# A job: the future to settle (asyncio's, with its loop; or a concurrent one for a caller
# without a loop), the caller's context, and the call.
# `grouped`: it may share a transaction with the grouped jobs next to it (module docstring).
_Job = tuple[Any, asyncio.AbstractEventLoop | None, contextvars.Context, Callable[[], Any], bool]
# Runs the members of a group (each a call in its caller's context) and returns each one's
# (value, error), in order, once what they wrote is committed.
Grouper = Callable[[list[Callable[[], Any]]], list[tuple[Any, BaseException | None]]]
# The most jobs one group takes (one transaction's worth of turns: well under a millisecond
# of SQLite's write lock each).
GROUP_MAX = 64

_live: weakref.WeakSet[StorageThreads] = weakref.WeakSet()


class StorageThreads:
    """Up to `size` threads named `<name>_<n>` taking jobs from one queue in order."""

    def __init__(
        self,
        size: int,
        name: str,
        initializer: Callable[[], None] | None = None,
        grouper: Grouper | None = None,
    ) -> None:
        self.size = size
        self.name = name
        self._initializer = initializer
        self._grouper = grouper
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # released by a thread waiting for work
        self._lock = threading.Lock()
        self._shut = False
        _live.add(self)
        # One collected without `shutdown` still stops its threads (once their jobs ran).
        weakref.finalize(self, _stop, self._jobs, self._threads)

    async def run(self, call: Callable[[], R], grouped: bool = False) -> R:
        """`call()` on a storage thread, in the caller's context; its result or exception.
        `grouped`: it may be committed with other grouped calls (module docstring)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._put((future, loop, contextvars.copy_context(), call, grouped))
        return await future

    def call(self, call: Callable[[], R]) -> R:
        """`call()` on a storage thread while this (non-loop) thread waits for it."""
        future: Future[R] = Future()
        self._put((future, None, contextvars.copy_context(), call, False))
        return future.result()

    def _put(self, job: _Job) -> None:
        if self._shut:
            raise RuntimeError("cannot schedule new work after the storage threads shut down")
        self._jobs.put(job)
        if self._idle.acquire(blocking=False):
            return  # a waiting thread takes it
        with self._lock:
            if len(self._threads) < self.size and not self._shut:
                thread = threading.Thread(
                    target=_work,
                    args=(self._jobs, self._idle, self._initializer, self._grouper),
                    name=f"{self.name}_{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)

    def shutdown(self, wait: bool = True) -> None:
        """Stop taking work; the queued jobs still run. With `wait`, return once they did."""
        with self._lock:
            if self._shut:
                threads = []
            else:
                self._shut = True
                threads = list(self._threads)
                for _ in threads:
                    self._jobs.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _work(
    jobs: queue.SimpleQueue[_Job | None],
    idle: threading.Semaphore,
    initializer: Callable[[], None] | None,
    grouper: Grouper | None = None,
) -> None:
    """A storage thread's loop (it holds no reference to its StorageThreads, so an unused one
    can be collected; `None` in the queue stops it)."""
    if initializer is not None:
        initializer()
    carried: list[_Job | None] = []  # the job that ended a group: taken, not yet run
    while True:
        job = carried.pop() if carried else jobs.get()
        if job is None:
            return
        if grouper is not None and job[4]:
            _run_group(job, jobs, idle, grouper, carried)
            continue
        future, loop, context, call, _grouped = job
        if future.cancelled():  # its caller gave up before the job started
            idle.release()
            continue
        try:
            value, error = context.run(call), None
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
            value, error = None, exc
        _deliver(future, loop, value, error)
        del job, future, loop, context, call, value, error
        idle.release()


def _run_group(
    first: _Job,
    jobs: queue.SimpleQueue[_Job | None],
    idle: threading.Semaphore,
    grouper: Grouper,
    carried: list[_Job | None],
) -> None:
    """`first` and the grouped jobs queued behind it, through `grouper`; the first job that is
    not grouped (or the stop mark) goes to `carried`, to run next."""
    group = [first]
    while len(group) < GROUP_MAX:
        try:
            job = jobs.get_nowait()
        except queue.Empty:
            break
        if job is None or not job[4]:
            carried.append(job)
            break
        group.append(job)
    members = [job for job in group if not job[0].cancelled()]
    if members:
        results = grouper([functools.partial(job[2].run, job[3]) for job in members])
        for job, (value, error) in zip(members, results, strict=True):
            _deliver(job[0], job[1], value, error)
    for _ in group:
        idle.release()


def _deliver(
    future: Any, loop: asyncio.AbstractEventLoop | None, value: Any, error: BaseException | None
) -> None:
    if loop is None:
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
    else:
        try:
            loop.call_soon_threadsafe(_settle, future, value, error)
        except RuntimeError:  # the loop closed while the job ran: no one is waiting
            pass


def _stop(jobs: queue.SimpleQueue[_Job | None], threads: list[threading.Thread]) -> None:
    for _ in threads:
        jobs.put(None)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


@atexit.register
def _at_exit() -> None:
    """The storage threads are daemons (an unused Storage never keeps a process alive); at exit
    the jobs already queued still run, as a ThreadPoolExecutor's would."""
    for threads in list(_live):
        threads.shutdown(wait=True)
