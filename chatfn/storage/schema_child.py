"""A bot's pending migrations, run in a child process (chatfn/storage/schema_child_main.py).

Alembic, Mako and the migration scripts, once imported and run, stay in a process's memory for
the rest of its life: a bot that migrated an empty database in its own process peaked 13 MB
higher than the same bot restarted on the migrated database (121 against 108 MB under the
pipeline benchmark's load, bench/journal/2026-11-28-streaming-cpu-and-peak-rss-issue-41.md).
So a bot's start (`Storage.create_tables`) checks the head with one plain query, as it always
did, and when something is pending it runs `upgrade` here, in a child of the same interpreter,
and waits for it: the serving process never imports Alembic. `chatfn migrate`, `chatfn check
--migrate` and `chatfn login` are one-shot commands and still migrate in their own process.

- The child migrates as `chatfn migrate` does (`schema.upgrade`: on PostgreSQL under its
  transaction-level advisory lock, so a cluster's processes starting at once still take turns).
  It takes no process lock (chatfn/runtime/process_lock.py): the parent's is an flock on
  `<database>.lock` or a session advisory lock under another key, and neither blocks the
  child's connection, nor is the lock's file descriptor inherited (`close_fds`).
- The URL goes to the child on stdin, not on its command line, where `ps` would show a password.
- A failed migration comes back as its message, and `Storage.create_tables` raises the same
  `StorageError` ("cannot migrate the database at ...: <the error>") as when it ran in process;
  a child that dies without saying why is reported with its exit code and its last lines.
- Stays in the process: an in-memory SQLite database (no other process can open it), and any
  process that called `in_process(True)`: the pytest plugin (chatfn.testing) does, since a test
  session builds hundreds of bots on fresh files, a child costs each ~1 s of CPU, and a test
  process's memory is not what this saves.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

from chatfn.storage.schema import SchemaState

_IN_PROCESS = [False]
# A child that neither migrates nor fails within this time is stopped and reported.
TIMEOUT = 600.0
# What an operator does when the child ends without an answer of its own (killed, out of
# memory, hung): the same migrations in the foreground, where their output shows.
FOREGROUND = "run `chatfn migrate` to run the migrations in the foreground and see why"


class MigrationFailed(Exception):
    """The child's migration failed: its message is the error the child caught."""


def in_process(on: bool | None = None) -> bool:
    """Whether a bot's start migrates in its own process; `on` sets it for this process."""
    if on is not None:
        _IN_PROCESS[0] = on
    return _IN_PROCESS[0]


def upgrade(url: str) -> SchemaState:
    """Run what is pending on the database at `url` in a child process; the state it found."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "chatfn.storage.schema_child_main"],
            input=json.dumps({"url": url}),
            capture_output=True,
            text=True,
            env=_child_env(),
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise MigrationFailed(
            f"the migration process did not finish in {TIMEOUT:.0f} s; {FOREGROUND}"
        ) from exc
    answer = _answer(done.stdout)
    if "state" in answer:
        return SchemaState(**answer["state"])
    if "error" in answer:
        raise MigrationFailed(answer["error"])
    tail = " | ".join(done.stderr.strip().splitlines()[-3:]) or "no output"
    raise MigrationFailed(
        f"the migration process exited with code {done.returncode}: {tail}; {FOREGROUND}"
    )


def _child_env() -> dict[str, str]:
    """The environment, with the folder this process imported chatfn from on PYTHONPATH when
    the child would not find it otherwise (`python bot.py` in a checkout that is not
    installed, started from another directory). An installed chatfn's folder, site-packages,
    is not added: on PYTHONPATH it would come before the standard library."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    if root not in _site_folders():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _site_folders() -> set[str]:
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return {str(Path(f).resolve()) for f in folders}


def _answer(stdout: str) -> dict[str, Any]:
    lines = stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
