"""Freed native memory handed back to the system, so a long-running bot's RSS stays flat.

What grew in the memory soak (bench/soak_memory.py; bench/README.md, "Issue 27", follow-up):
not Python objects (tracemalloc's traced total stayed within 0.7 MB while RSS grew; pymalloc's
arenas stayed at 62-64) and, past the bound of its page cache (`storage.db.SQLITE_CACHE_KIB`),
not SQLite, but memory freed in glibc's malloc heaps and kept by the process. Every thread that
allocates gets an arena of its own (the storage threads, the executor threads that decode
images and resolve names), and glibc returns on its own only the top of the main heap: the
free holes in the arenas add up over tens of thousands of messages. The two full soaks of
100 000 messages: 3.5 MB of growth after the warm-up with this trim, flat from 30 000
messages on; 5.9 MB without it, levelling off only from 70 000 on.

`malloc_trim(0)` gives every arena's free pages back (`madvise`), in about a millisecond. The
bot calls it every `TRIM_EVERY` seconds from a thread of its own (it never holds the event
loop), so what freed memory the process keeps is bounded by what it frees in that time. Only
where the C library is glibc; elsewhere (musl, macOS) nothing runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable

# Seconds between two trims.
TRIM_EVERY = 30.0


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class Trimmer:
    """Calls `malloc_trim(0)` every `every` seconds on a daemon thread until `stop()`."""

    def __init__(self, every: float = TRIM_EVERY) -> None:
        self.every = every
        self.trims = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """False (and nothing started) where there is no `malloc_trim`."""
        trim = malloc_trim()
        if trim is None or self._thread is not None:
            return False

        def run() -> None:
            while not self._stop.wait(self.every):
                trim(0)  # ctypes releases the GIL for the call
                self.trims += 1

        self._thread = threading.Thread(target=run, name="malloc-trim", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
