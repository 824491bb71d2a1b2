"""Drive `python bot.py` (console channel) as a real subprocess over pipes, line by line."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, **sections: Any) -> Path:
    """A config file in tmp_path: its own SQLite file, no plugins, no model."""
    data: dict[str, Any] = {
        "storage": {"url": "sqlite:///bot.db"},
        "plugins": {"paths": []},
        "bot": {"admins": ["root"]},
    }
    data.update(sections)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class ConsoleProc:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._seen = 0

    @classmethod
    async def start(cls, config: Path) -> ConsoleProc:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL")
        }
        env["PYTHONUNBUFFERED"] = "1"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "bot.py"),
            "--config",
            str(config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=str(config.parent),
            env=env,
        )
        return cls(proc)

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode())
        await self.proc.stdin.drain()

    async def expect(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """The next output line (not yet consumed) matching `pattern`."""
        regex = re.compile(pattern)
        async with asyncio.timeout(timeout):
            while True:
                while self._seen < len(self.lines):
                    line = self.lines[self._seen]
                    self._seen += 1
                    if m := regex.search(line):
                        return m
                await self._read_line()

    async def drain(self, seconds: float) -> list[str]:
        """Read whatever arrives for `seconds`; returns those lines."""
        start = len(self.lines)
        try:
            async with asyncio.timeout(seconds):
                while True:
                    await self._read_line()
        except TimeoutError:
            pass
        return self.lines[start:]

    async def _read_line(self) -> None:
        assert self.proc.stdout is not None
        raw = await self.proc.stdout.readline()
        if not raw:
            raise EOFError("bot.py exited; output so far:\n" + "\n".join(self.lines))
        self.lines.append(raw.decode().rstrip("\n"))

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flushing; what a crash or an OOM kill looks like."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    async def close(self) -> int:
        if self.proc.returncode is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                rest = await self.proc.stdout.read() if self.proc.stdout else b""
                self.lines.extend(rest.decode().splitlines())
                return await self.proc.wait()
        except TimeoutError:
            self.kill()
            return await self.proc.wait()
