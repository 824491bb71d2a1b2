"""The checks of .ci/container-check.sh on a built image (its argument), run with podman as
users run the image with docker. The podman flags come from $PODMAN_ARGS, the ulimits from
$ULIMITS, the expected version from $CHATFN_VERSION.

1. The image: Docker format with its HEALTHCHECK, labels (version = chatfn/common/version.py's).
2. The quick start, no config: `run -p 8080 -v VOLUME:/data` with OPENAI_API_KEY /
   OPENAI_BASE_URL / CHATFN_MODEL: /healthz on the published port, the process is not root,
   `podman healthcheck run` passes, a message is answered by the fake model on the host (a tiny
   aiohttp server speaking OpenAI's chat completions, reached at the container network's
   gateway address).
3. /data/config.yaml and a plugin written into the volume: a new container uses both; after it is
   removed, another on the same volume still has the chat's history (the SQLite file) and the
   plugin.
4. SIGTERM mid-turn (`podman stop`, the model still thinking): the process exits 0 within the
   stop grace, and the turn is answered, once, by the next container on the volume.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from aiohttp import web

IMAGE = sys.argv[1]
PODMAN = ["podman", *shlex.split(os.environ.get("PODMAN_ARGS", ""))]
ULIMITS = shlex.split(os.environ.get("ULIMITS", ""))
VERSION = os.environ["CHATFN_VERSION"]
VOLUME = "chatfn-check-data"
PLUGIN = """
from pydantic import BaseModel, Field
from function_calls import FunctionResult, tool_function


class NoteArgs(BaseModel):
    text: str = Field(min_length=1)


@tool_function(name="note_add", description="Save a note.")
def note_add(ctx, args: NoteArgs) -> FunctionResult:
    return FunctionResult(messages=[f"Noted: {args.text}"])
"""


def say(text: str) -> None:
    print(f"container-check: {text}", flush=True)


def pm(*args: str, check: bool = True, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [*PODMAN, *args], input=stdin, capture_output=True, text=True, timeout=300
    )
    if args[0] == "logs":
        return (proc.stdout + proc.stderr).strip()
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return proc.stdout.strip()


def until(predicate: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} (within {timeout} s)")


class FakeModel:
    """OpenAI's POST /v1/chat/completions, answering `answer to <the user's text>`; with
    `hang` set, a request waits until it is cleared (or the bot's connection drops)."""

    def __init__(self) -> None:
        self.hang = False
        self.waiting = 0
        self.answered: list[str] = []
        self.keys: set[str] = set()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        self._ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completion)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        self._loop.run_until_complete(runner.setup())
        # Every address: the container reaches it at its network's gateway, whose bridge
        # exists only once a container runs on it.
        site = web.TCPSite(runner, "0.0.0.0", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()

    async def _completion(self, request: web.Request) -> web.Response:
        self.keys.add(request.headers.get("Authorization", ""))
        body = await request.json()
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else json.dumps(content)
        text = text.split("</context>\n", 1)[-1]
        if self.hang:
            self.waiting += 1
            while self.hang:
                await asyncio.sleep(0.05)
        self.answered.append(text)
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", "m"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"answer to {text}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
        )


def http(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 60) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
        return json.loads(raw) if raw.startswith((b"{", b"[")) else raw.decode()


def start(name: str, *extra: str) -> str:
    """A detached container of the image on the volume, port 8080 published on a free
    loopback port; the base URL once /healthz answers."""
    pm(
        "run",
        "-d",
        "--name",
        name,
        *ULIMITS,
        "-p",
        "127.0.0.1::8080",
        "-v",
        f"{VOLUME}:/data",
        *extra,
        IMAGE,
    )
    port = until(lambda: pm("port", name, "8080", check=False), 30, "no published port")
    base = f"http://127.0.0.1:{port.rsplit(':', 1)[-1]}"

    def healthy() -> bool:
        if pm("inspect", "-f", "{{.State.Running}}", name) != "true":
            raise AssertionError(f"{name} exited:\n{pm('logs', name, check=False)}")
        try:
            return http("GET", f"{base}/healthz", timeout=2) is not None
        except (urllib.error.URLError, OSError):
            return False

    until(healthy, 90, f"{name}: /healthz did not answer on {base}", interval=0.2)
    return base


def message(base: str, chat: str, text: str) -> list[str]:
    body = {"chat_id": chat, "sender_id": "ann", "text": text}
    return [r["text"] for r in http("POST", f"{base}/v1/messages", body)["replies"]]


def history(base: str, chat: str) -> list[tuple[str, str]]:
    page = http("GET", f"{base}/v1/history?chat_id={chat}&limit=500")
    return [(m["role"], m["text"]) for m in page["messages"]]


def check_image() -> None:
    info = json.loads(pm("image", "inspect", IMAGE))[0]
    config = info["Config"]
    labels = config.get("Labels") or {}
    assert labels.get("org.opencontainers.image.version") == VERSION, labels
    assert labels.get("org.opencontainers.image.licenses") == "MIT", labels
    assert "org.opencontainers.image.source" in labels, labels
    health = info.get("Healthcheck") or config.get("Healthcheck")
    assert health and "chatfn check" in " ".join(health["Test"]), f"no HEALTHCHECK: {health}"
    assert config.get("User") == "chatfn", config.get("User")
    assert "/data" in (config.get("Volumes") or {}), config.get("Volumes")
    out = pm(
        "run",
        "--rm",
        *ULIMITS,
        "--entrypoint",
        "sh",
        IMAGE,
        "-c",
        "chatfn --version; command -v gcc cc pip || true",
    )
    assert out.splitlines() == [f"chatfn {VERSION}"], f"version / compilers or pip: {out!r}"
    say(f"image: {int(info['Size']) / 1e6:.0f} MB, labels, HEALTHCHECK, user chatfn, no cc/pip")


def gateway_address() -> str:
    """The host's address on the default container network (its bridge's gateway)."""
    info = json.loads(pm("network", "inspect", "podman"))[0]
    return str(info["subnets"][0]["gateway"])


def check_quick_start(model: FakeModel, host: str) -> None:
    """No config file: the HTTP channel on 8080, the model from the environment."""
    base = start(
        "quick",
        "-e",
        "OPENAI_API_KEY=sk-container-check",
        "-e",
        f"OPENAI_BASE_URL=http://{host}:{model.port}/v1",
        "-e",
        "CHATFN_MODEL=gpt-4o-mini",
    )
    uid = pm("exec", "quick", "sh", "-c", "awk '/^Uid:/ {print $2}' /proc/1/status; id -un")
    assert uid.splitlines() == ["10001", "chatfn"], f"PID 1 runs as {uid!r}"
    pm("healthcheck", "run", "quick")  # exit 0: healthy
    assert message(base, "private:ann", "hello") == ["answer to hello"]
    assert model.keys == {"Bearer sk-container-check"}, model.keys
    page = http("GET", f"{base}/")
    assert "<html" in page.lower(), page[:200]
    pm("rm", "--force", "--time", "0", "quick")
    say("quick start: /healthz on the published port, uid 10001, healthcheck, model answered")


def check_volume(model: FakeModel, host: str) -> None:
    """/data/config.yaml and /data/plugins/notes.py, written into the volume, used by a new
    container; the history and the plugin still there in the next one."""
    config = (
        "models:\n"
        "  default:\n"
        "    provider: openai\n"
        f"    base_url: http://{host}:{model.port}/v1\n"
        "    api_key: ${CHECK_MODEL_KEY}\n"
        "    model: gpt-4o-mini\n"
        "    max_retries: 0\n"
        "bot:\n"
        "  shutdown_grace: 2\n"
        "channels:\n"
        "  http: {host: 0.0.0.0, port: 8080}\n"
    )
    write = (
        "mkdir -p /data/plugins && cat > /data/config.yaml"
        " && printf '%s' \"$PLUGIN\" > /data/plugins/notes.py"
    )
    pm(
        "run",
        "--rm",
        "-i",
        *ULIMITS,
        "-v",
        f"{VOLUME}:/data",
        "-e",
        f"PLUGIN={PLUGIN}",
        "--entrypoint",
        "sh",
        IMAGE,
        "-c",
        write,
        stdin=config,
    )
    env = ("-e", "CHECK_MODEL_KEY=sk-from-config")
    base = start("first", *env)
    assert message(base, "private:ann", "second") == ["answer to second"]
    assert "Bearer sk-from-config" in model.keys, model.keys
    assert message(base, "private:ann", "/note_add text=kept") == ["Noted: kept"]
    pm("rm", "--force", "--time", "0", "first")
    base = start("second", *env)
    rows = history(base, "private:ann")
    assert ("user", "hello") in rows and ("assistant", "answer to hello") in rows, rows
    assert ("assistant", "Noted: kept") in rows, rows
    assert message(base, "private:ann", "/note_add text=again") == ["Noted: again"]
    files = pm("exec", "second", "sh", "-c", "ls /data /data/data /data/plugins")
    assert "chatfn.db" in files and "notes.py" in files, files
    say("volume: config.yaml and plugin used; history and plugin survive a new container")
    check_sigterm(model, base, env)


def check_sigterm(model: FakeModel, base: str, env: tuple[str, ...]) -> None:
    """`podman stop` while the model thinks: exit 0 within the grace, answered after."""
    model.hang, model.waiting = True, 0
    errors: list[BaseException] = []

    def post() -> None:
        try:
            message(base, "private:bob", "cut short")
        except BaseException as exc:  # the connection drops with the container
            errors.append(exc)

    sender = threading.Thread(target=post, daemon=True)
    sender.start()
    until(lambda: model.waiting >= 1, 60, "the turn did not reach the model")
    stopped = time.monotonic()
    pm("stop", "--time", "30", "second")
    took = time.monotonic() - stopped
    code = pm("inspect", "-f", "{{.State.ExitCode}}", "second")
    assert code == "0" and took < 25, f"SIGTERM: exit {code} after {took:.1f} s"
    sender.join(10)
    assert "cut short" not in model.answered, model.answered
    model.hang = False
    pm("rm", "--force", "--time", "0", "second")
    base = start("third", *env)

    def answered() -> list[tuple[str, str]]:
        rows = [r for r in history(base, "private:bob") if r[0] == "assistant"]
        return rows

    # The resume pass runs before the bot listens: by /healthz, the turn has been run.
    rows = until(answered, 60, "the cut turn was not answered after the restart", 0.2)
    assert rows == [("assistant", "answer to cut short")], rows
    assert model.answered.count("cut short") == 1, model.answered
    pm("rm", "--force", "--time", "0", "third")
    say(f"SIGTERM mid-turn: exit 0 in {took:.1f} s, answered once after the restart")


def main() -> int:
    started = time.monotonic()
    model = FakeModel()
    check_image()
    pm("volume", "create", VOLUME)
    host = gateway_address()
    try:
        check_quick_start(model, host)
        check_volume(model, host)
    except BaseException:
        for name in ("quick", "first", "second", "third"):
            logs = pm("logs", "--tail", "40", name, check=False)
            if logs:
                print(f"--- {name} ---\n{logs}", file=sys.stderr)
        raise
    say(f"checks passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
