"""chatfn/runtime/memory.py: freed native memory goes back to the system (issue 27 §3, the soak)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from chatfn.runtime.memory import Trimmer, malloc_trim

trim = malloc_trim()
needs_glibc = pytest.mark.skipif(trim is None, reason="no malloc_trim (not glibc)")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@needs_glibc
def test_a_trim_gives_back_what_a_thread_freed_in_the_middle_of_its_arena() -> None:
    kept: list[bytes] = []

    def churn() -> None:
        # 64 MB in 2 KB blocks from this thread's own arena (past pymalloc's 512 bytes), then
        # all freed but every 64th: the survivors pin the arena's top, so glibc keeps the rest.
        blocks = [bytes(2048) for _ in range(32_768)]
        kept.extend(blocks[::64])
        del blocks

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    before = _rss_mb()
    assert trim is not None
    trim(0)
    after = _rss_mb()
    assert before - after > 30, (before, after)  # most of the 63 MB freed went back
    assert len(kept) == 512


@needs_glibc
def test_the_trimmer_runs_on_its_own_thread_until_stopped() -> None:
    trimmer = Trimmer(every=0.001)
    assert trimmer.start()
    assert not trimmer.start()  # once
    thread = trimmer._thread
    assert thread is not None and thread.daemon and thread.name == "malloc-trim"
    trimmer.stop()
    assert not thread.is_alive()
