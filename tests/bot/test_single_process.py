"""One bot process per database (issue 34, item 4): a second `python bot.py` on the database a
running bot holds exits non-zero with one line naming the first (pid, host, since when), while
`chatfn migrate` and `chatfn check` still work beside it; a SIGKILLed bot leaves no lock that
blocks the next start. The lock is per database file, so bots on other files (and the TestBot
harness, which takes none) are not affected."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
from pathlib import Path
from subprocess import PIPE

import pytest

from chatfn.runtime import process_lock
from chatfn.runtime.process_lock import DatabaseInUse
from tests.bot.conftest import PYTHON, ROOT, free_port, write_config
from tests.bot.test_http import wait_healthy


async def _run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """Run `python ARGS` (bot.py from the checkout) to its end: (exit code, stdout, stderr)."""
    if args[0] == "bot.py":
        args = [str(ROOT / "bot.py"), *args[1:]]
    proc = await asyncio.create_subprocess_exec(
        PYTHON, *args, cwd=cwd, env=env, stdout=PIPE, stderr=PIPE
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def _start(cfg: Path, cwd: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    cmd = [PYTHON, str(ROOT / "bot.py"), "--config", str(cfg), "--channel", "http"]
    return subprocess.Popen(
        [*cmd, "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def test_a_second_bot_on_the_same_database_refuses_to_start(
    tmp_path: Path, bot_env: dict[str, str]
) -> None:
    cfg = write_config(tmp_path, None, channels={"http": {"host": "127.0.0.1"}})
    first_port = free_port()
    procs = [_start(cfg, tmp_path, bot_env, first_port)]
    try:
        await wait_healthy(f"http://127.0.0.1:{first_port}", procs[0])

        # A second bot, and beside it `migrate` and `check`, which are not bot processes and
        # work while the bot runs (all three at once: each is a Python start-up).
        second, migrate, check = await asyncio.gather(
            _run(["bot.py", "--config", str(cfg), "--channel", "http"], tmp_path, bot_env),
            _run(["-m", "chatfn", "migrate", "--config", str(cfg)], tmp_path, bot_env),
            _run(["-m", "chatfn", "check", "--config", str(cfg)], tmp_path, bot_env),
        )
        code, _out, err = second
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1, lines
        line = lines[0]
        assert line.startswith("chatfn: the database ")
        assert str(tmp_path / "data" / "chatfn.db") in line
        assert f"pid {procs[0].pid} on host {socket.gethostname()}, since " in line
        assert re.search(r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line)
        assert migrate[0] == 0, migrate
        assert check[0] == 0, check

        # A killed bot leaves nothing that blocks the next start (the kernel drops the lock).
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(20)
        third_port = free_port()
        procs.append(_start(cfg, tmp_path, bot_env, third_port))
        await wait_healthy(f"http://127.0.0.1:{third_port}", procs[1])
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(20) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_the_lock_is_per_database_file(tmp_path: Path) -> None:
    """Two databases in one process: each its own lock. The same file under two spellings is
    one database; once released it can be taken again."""
    (tmp_path / "sub").mkdir()
    one = process_lock.take(f"sqlite:///{tmp_path / 'one.db'}")
    other = process_lock.take(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with pytest.raises(DatabaseInUse) as refused:
            process_lock.take(f"sqlite:///{tmp_path / 'sub' / '..' / 'one.db'}")
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in str(refused.value)
        assert (tmp_path / "one.db.lock").exists()
    finally:
        one.release()
        other.release()
    again = process_lock.take(f"sqlite:///{tmp_path / 'one.db'}")
    again.release()
    # An in-memory database cannot be opened by another process: nothing to lock.
    process_lock.take("sqlite://").release()
    process_lock.take("sqlite:///:memory:").release()
