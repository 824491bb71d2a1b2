"""The guard against database work on the event loop: every SQL statement any SQLAlchemy engine
runs is checked, and one that runs on a thread whose asyncio event loop is running is recorded.

The bot keeps every statement off the loop (`Storage.run`: one thread hop per transaction), so
a slow database (PostgreSQL across a network, a SQLite file another process holds locked)
never stalls the other chats of a process. A statement that slips back onto the loop costs
nothing visible in a test on a local SQLite file, which is why the check is automatic: the
pytest plugin (`chatfn.testing`) installs it for every test and fails a test in which
it recorded anything, with the stack of each statement.

    with LoopGuard() as guard:
        ...                      # run the code
    guard.violations             # [Violation(statement, stack), ...]

Installed once on the `Engine` class (`before_cursor_execute`), so it sees engines made after
it too; `Storage.run` and plain threads (asyncio.to_thread, a sync test) pass it.

What it judges is the code that asked for the statement: the first frame outside SQLAlchemy
and chatfn's `storage` package. When that is a test module (`test_*.py`, `conftest.py`, a file
under a `tests/` directory) the statement is the test's own look at what the bot stored, not
the bot's or a plugin's work, and is let through; anything else (runtime, built-ins, a
plugin, a channel) is recorded.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

# Frames of these files are left out of a violation's stack: they are SQLAlchemy's own path.
_NOISE = ("/sqlalchemy/", "/loop_guard.py")
_STORAGE = str(Path(__file__).resolve().parent) + "/"


@dataclass(frozen=True, slots=True)
class Violation:
    statement: str
    stack: str  # the caller's frames, innermost last (SQLAlchemy's own frames left out)

    def __str__(self) -> str:
        return f"{self.statement[:200]}\n{self.stack}"


class LoopGuard:
    """Records statements run on a running event loop's thread while it is active (nested
    guards each record). `allowed` (a context manager) lets a block through on purpose."""

    _active: list[LoopGuard] = []
    _lock = threading.Lock()
    _listening = False

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self._allow = threading.local()

    def __enter__(self) -> LoopGuard:
        with LoopGuard._lock:
            if not LoopGuard._listening:
                event.listen(Engine, "before_cursor_execute", _check)
                LoopGuard._listening = True
            LoopGuard._active.append(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        with LoopGuard._lock:
            if self in LoopGuard._active:
                LoopGuard._active.remove(self)

    def allowed(self) -> _Allowed:
        """`with guard.allowed(): ...`: statements in the block are not recorded (a test that
        reads the database on purpose, to assert on it, before anything else runs)."""
        return _Allowed(self._allow)

    def _record(self, statement: str) -> None:
        if getattr(self._allow, "depth", 0):
            return
        frames = [
            f
            for f in traceback.extract_stack()[:-3]
            if not any(part in f.filename.replace("\\", "/") for part in _NOISE)
        ]
        caller = next((f for f in reversed(frames) if not f.filename.startswith(_STORAGE)), None)
        if caller is not None and _is_test(caller.filename):
            return
        stack = "".join(traceback.format_list(frames[-12:]))
        self.violations.append(Violation(" ".join(statement.split()), stack))


class _Allowed:
    def __init__(self, local: threading.local) -> None:
        self._local = local

    def __enter__(self) -> None:
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def __exit__(self, *_exc: object) -> None:
        self._local.depth -= 1


def _is_test(filename: str) -> bool:
    path = Path(filename)
    return path.name.startswith("test_") or path.name == "conftest.py" or "tests" in path.parts[:-1]


def on_loop_thread() -> bool:
    """Whether the calling thread is running an asyncio event loop right now."""
    return asyncio._get_running_loop() is not None


def _check(
    _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    check(statement)


def check(statement: str) -> None:
    """Record `statement` in every active guard when it runs on a running event loop's thread:
    called for Core's statements (the engine event) and by chatfn/storage/prepared.py, whose
    statements go to the driver's cursor without Core's events."""
    if not LoopGuard._active or not on_loop_thread():
        return
    for guard in list(LoopGuard._active):
        guard._record(statement)
