"""Threads for the blocking work the bot does for users, apart from asyncio's default executor.

A thread cannot be cancelled: `asyncio.timeout` around `asyncio.to_thread` ends the wait, not
the work, so a synchronous function that hangs, or a DNS lookup of a name whose servers never
answer, keeps its thread for as long as it likes. On asyncio's default executor
(`min(32, cpus + 4)` threads: 6 on 2 cores) those are the threads everything else waits for:
the admin console's password check, aiohttp's own DNS lookups (models, platforms), every
`asyncio.to_thread` of the bot. A few stuck calls made by users would stop the bot for
everyone. So each kind of user work gets a bounded pool of its own: when it is full, only more
of the same work waits (and meets its own timeout); nothing else does.

- `functions` (`FUNCTION_THREADS`, 8): synchronous (`def`) tool functions
  (function_calls/executor.py), and whatever a plugin or built-in hands to `run_blocking`
  (decoding an image a user sent inline, reading a document a user added).
- `lookups` (`LOOKUP_THREADS`, 4): DNS lookups of the hosts in URLs users give
  (chatfn/common/fetch.py); the downloads themselves are asynchronous and use no thread.

Threads start on first use; both pools live as long as the process, like the default one.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["FUNCTION_THREADS", "LOOKUP_THREADS", "getaddrinfo", "run_blocking"]

FUNCTION_THREADS = 8
LOOKUP_THREADS = 4

P = ParamSpec("P")
T = TypeVar("T")

_pools: dict[str, ThreadPoolExecutor] = {}
_SIZES = {"functions": FUNCTION_THREADS, "lookups": LOOKUP_THREADS}


def pool(name: str) -> ThreadPoolExecutor:
    """The named pool (`functions` or `lookups`), made on first use."""
    executor = _pools.get(name)
    if executor is None:
        executor = _pools[name] = ThreadPoolExecutor(
            max_workers=_SIZES[name], thread_name_prefix=f"chatfn-{name}"
        )
    return executor


async def run_blocking(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`func(*args, **kwargs)` on the `functions` pool, as `asyncio.to_thread` would run it on
    the default one (the caller's context variables go along: log context, the loop guard)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await loop.run_in_executor(pool("functions"), call)


async def getaddrinfo(
    host: str, port: int, family: int = 0, flags: int = 0
) -> list[tuple[Any, ...]]:
    """`socket.getaddrinfo` for a stream socket, on the `lookups` pool."""
    loop = asyncio.get_running_loop()
    lookup = functools.partial(socket.getaddrinfo, host, port, family, socket.SOCK_STREAM, 0, flags)
    return await loop.run_in_executor(pool("lookups"), lookup)
