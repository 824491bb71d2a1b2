"""The scale-out stack of compose.cluster.yaml, run with podman-compose (.ci/container-check.sh
calls this with CHATFN_COMPOSE_CHECK=1): PostgreSQL and RabbitMQ stand-ins built from Debian's
packages (.ci/standins/), `migrate`, a gateway and two workers of the image under test; 100
messages over 10 chats through the gateway's HTTP API, answered by a fake model on the host,
with one worker container killed mid-run: every message answered once, none lost, none twice.

podman-compose 1.0.3 waits for no `service_healthy`, so this waits itself: the services are
started in the order of their `depends_on`, each once the previous ones are healthy or done.
Arguments: the image, the folder holding compose.cluster.yaml and deploy/.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from pathlib import Path

from container_check import PODMAN, ULIMITS, FakeModel, http, pm, say, until

IMAGE, SOURCE_DIR = sys.argv[1], Path(sys.argv[2])
PROJECT = "chatfncheck"
STACK = Path(tempfile.mkdtemp(prefix="chatfn-stack-"))  # compose.cluster.yaml, deploy/, .env
TOKEN = "check-token-1234567890"
CHATS, PER_CHAT = 10, 10


def compose(*args: str) -> None:
    cmd = [
        "podman-compose",
        "-p",
        PROJECT,
        "--podman-args",
        shlex.join(PODMAN[1:]),
        "--podman-run-args",
        shlex.join(ULIMITS),
        "-f",
        "compose.cluster.yaml",
        *args,
    ]
    proc = subprocess.run(cmd, cwd=STACK, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        )


def container(service: str) -> str:
    return f"{PROJECT}_{service}_1"


def healthy(service: str) -> bool:
    name = container(service)
    if pm("inspect", "-f", "{{.State.Running}}", name, check=False) != "true":
        raise AssertionError(f"{name} is not running:\n{pm('logs', '--tail', '30', name)}")
    return (
        subprocess.run([*PODMAN, "healthcheck", "run", name], capture_output=True).returncode == 0
    )


def post(base: str, chat: str, text: str) -> None:
    import json
    import urllib.request

    body = json.dumps({"chat_id": chat, "sender_id": "ann", "text": text}).encode()
    req = urllib.request.Request(f"{base}/v1/messages", data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()


def history(base: str, chat: str) -> list[tuple[str, str]]:
    import json
    import urllib.request

    req = urllib.request.Request(f"{base}/v1/history?chat_id={chat}&limit=500")
    req.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        page = json.loads(resp.read())
    return [(m["role"], m["text"]) for m in page["messages"]]


def main() -> int:
    started = time.monotonic()
    model = FakeModel()
    for name in ("postgres", "rabbitmq"):
        pm(
            "build",
            "--quiet",
            "--format",
            "docker",
            *ULIMITS,
            "--build-arg",
            f"BASE_IMAGE={os.environ['BASE_IMAGE']}",
            "-t",
            f"localhost/chatfn-{name}:check",
            str(Path(__file__).parent / "standins" / name),
        )
    say(f"stand-in images built in {time.monotonic() - started:.0f} s")
    port = until(lambda: _free_port(), 5, "no free port")
    # The stack's folder as README has it: the compose file, deploy/, and a .env.
    project = STACK
    shutil.copy(SOURCE_DIR / "compose.cluster.yaml", project)
    shutil.copytree(SOURCE_DIR / "deploy", project / "deploy")
    env = {
        "CHATFN_IMAGE": IMAGE,
        "POSTGRES_IMAGE": "localhost/chatfn-postgres:check",
        "RABBITMQ_IMAGE": "localhost/chatfn-rabbitmq:check",
        "POSTGRES_PASSWORD": "pg-check-secret",
        "RABBITMQ_PASSWORD": "mq-check-secret",
        "CHATFN_HTTP_TOKEN": TOKEN,
        "CHATFN_ADMIN_PASSWORD": "admin-check-secret",
        "CHATFN_BIND": "127.0.0.1",
        "CHATFN_PORT": str(port),
        "OPENAI_API_KEY": "sk-compose-check",
        "CHATFN_MODEL": "gpt-4o-mini",
    }
    dotenv = project / ".env"
    dotenv.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    try:
        compose("up", "-d", "postgres", "rabbitmq")
        until(lambda: healthy("postgres") and healthy("rabbitmq"), 180, "services not healthy", 1)
        # The fake model, at the host's address on the stack's network (its bridge's gateway).
        host = pm(
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}",
            container("postgres"),
        )
        assert host, "the stack's network has no gateway"
        env["OPENAI_BASE_URL"] = f"http://{host}:{model.port}/v1"
        dotenv.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        compose("up", "-d", "--no-deps", "migrate")
        until(
            lambda: pm("inspect", "-f", "{{.State.Status}}", container("migrate")) == "exited",
            120,
            "migrate did not finish",
            0.5,
        )
        code = pm("inspect", "-f", "{{.State.ExitCode}}", container("migrate"))
        assert code == "0", f"migrate exit {code}:\n{pm('logs', container('migrate'))}"
        compose("up", "-d", "--no-deps", "gateway", "worker-1", "worker-2")
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return http("GET", f"{base}/healthz", timeout=2) is not None
            except (urllib.error.URLError, OSError):
                return False

        until(up, 120, "the gateway's /healthz did not answer", 0.5)
        until(lambda: healthy("worker-1") and healthy("worker-2"), 120, "workers not healthy", 1)
        say(f"stack up in {time.monotonic() - started:.0f} s")
        sent = [0]
        lock = threading.Lock()

        def chat(n: int) -> None:
            for i in range(PER_CHAT):
                try:
                    post(base, f"private:c{n}", f"m{n}-{i}")
                except (urllib.error.URLError, OSError):
                    pass  # a reply cut off with its worker: the history decides
                with lock:
                    sent[0] += 1

        threads = [threading.Thread(target=chat, args=(n,), daemon=True) for n in range(CHATS)]
        for t in threads:
            t.start()
        until(lambda: sent[0] >= 30, 180, "30 messages were not answered")
        pm("kill", container("worker-1"))
        say(f"killed worker-1 after {sent[0]} messages")
        for t in threads:
            t.join(300)

        def all_answered() -> bool:
            return all(
                sum(r[0] == "assistant" for r in history(base, f"private:c{n}")) >= PER_CHAT
                for n in range(CHATS)
            )

        until(all_answered, 120, "not every message was answered", 1)
        for n in range(CHATS):
            rows = history(base, f"private:c{n}")
            users = sorted(t for r, t in rows if r == "user")
            answers = sorted(t for r, t in rows if r == "assistant")
            want = sorted(f"m{n}-{i}" for i in range(PER_CHAT))
            assert users == want, f"chat c{n}: {users}"
            assert answers == sorted(f"answer to {w}" for w in want), f"chat c{n}: {answers}"
        say(
            f"cluster: {CHATS * PER_CHAT} messages over {CHATS} chats answered once each with "
            f"worker-1 killed; {time.monotonic() - started:.0f} s"
        )
    except BaseException:
        for service in ("postgres", "rabbitmq", "migrate", "gateway", "worker-1", "worker-2"):
            logs = pm("logs", "--tail", "30", container(service), check=False)
            print(f"--- {service} ---\n{logs}", file=sys.stderr)
        raise
    finally:
        subprocess.run(
            [
                "podman-compose",
                "-p",
                PROJECT,
                "--podman-args",
                shlex.join(PODMAN[1:]),
                "-f",
                "compose.cluster.yaml",
                "down",
                "-v",
            ],
            cwd=STACK,
            capture_output=True,
            timeout=300,
            check=False,
        )
        shutil.rmtree(STACK, ignore_errors=True)
    return 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main())
