"""What the console market's end-to-end tests share: `chatfn run --channel http` in a venv of
its own (tests/chatfn/test_plugin_cli.py's `Venv`: what the market installs lands there, never
in the test's environment), talked to over its HTTP API; and a folder served over HTTP as a
static host serves the market's index JSON."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.chatfn.test_plugin_cli import Venv, clean_env
from tests.kit import until_sync

TOKEN = "market-test-token"


class Bot:
    """`chatfn run` in the venv, and the HTTP API to talk to it."""

    def __init__(self, root: Path, venv: Venv, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = (root / "bot.log").open("w")
        self.proc = subprocess.Popen(
            [str(venv.python), "-m", "chatfn", "run", "--channel", "http"]
            + ["--config", str(root / "config.yaml")],
            cwd=root,
            env=clean_env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        until_sync(self.up, timeout=60, message=lambda: self.tail())

    def up(self) -> bool:
        assert self.proc.poll() is None, self.tail()
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def say(self, chat: str, text: str) -> list[str]:
        body = json.dumps({"chat_id": chat, "sender_id": "ann", "text": text}).encode()
        request = urllib.request.Request(
            self.url + "/v1/messages",
            data=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as resp:
            return [r["text"] for r in json.loads(resp.read())["replies"]]

    def tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-3000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def serve_folder(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    """`folder` over HTTP on 127.0.0.1 (a thread; `shutdown()` when done) and its base URL."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
