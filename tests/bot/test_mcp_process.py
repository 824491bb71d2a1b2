"""The bot owns its stdio MCP servers' processes: after SIGTERM none is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.kit import free_port, until_sync

pytest.importorskip("mcp_server_time")
ROOT = Path(__file__).resolve().parents[2]


def children_running(parent: int, needle: str) -> list[int]:
    """Pids of live processes whose parent is `parent` and whose command line has `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and needle in cmdline and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc")
def test_sigterm_leaves_no_mcp_server_process(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"storage: {{url: 'sqlite:///{tmp_path / 'bot.db'}'}}\n"
        "mcp:\n  servers:\n"
        f"    time: {{command: {sys.executable}, args: [-m, mcp_server_time]}}\n"
    )
    port = free_port()  # told to `python bot.py`
    bot = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bot.py"),
            "--channel",
            "http",
            "--port",
            str(port),
            "--config",
            str(config),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        servers: list[int] = []

        def started() -> bool:
            servers[:] = children_running(bot.pid, "mcp_server_time")
            return bool(servers)

        until_sync(started, 30, "the bot did not start the MCP server", interval=0.1)
        # Wait until the bot has started (the server is connected) before stopping it.
        until_sync(lambda: healthy(port), 30, "the bot did not become healthy", interval=0.1)
        os.kill(bot.pid, signal.SIGTERM)
        _, err = bot.communicate(timeout=30)
        assert bot.returncode == 0, err
        assert "chatfn stopped" in err
        # At once: the bot waited for its servers to end before it exited.
        assert [pid for pid in servers if alive(pid)] == []
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()
