"""A real Synapse homeserver for the Matrix channel's tests, started once per test session.

`Synapse.start(folder)` writes a homeserver config into `folder` (SQLite, a free port on
127.0.0.1, the client API only: no federation listener and no federation allowed, a
registration shared secret, authenticated media on, rate limits relaxed so the tests are
not slowed, cheap password hashing), runs `python -m synapse.app.homeserver` from the
installed `matrix-synapse` package as a subprocess and waits for `/_matrix/client/versions`.

Users are registered through Synapse's shared-secret registration API
(`/_synapse/admin/v1/register`, https://element-hq.github.io/synapse/latest/admin_api/register_api.html):
GET a nonce, POST the HMAC-SHA1 of nonce, user, password and admin flag keyed with the secret;
the answer carries an access token and a device id, so no login round trip is needed.

Rate limits: the config's `rc_*` sections allow far more than the tests send, except that a
test may ask for a real M_LIMIT_EXCEEDED (tests/channels/matrix/test_matrix.py uses a proxy for a
429 on demand: Synapse cannot be told "refuse the next send").
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.kit import free_port
from tests.kit.servers import wait_started

SERVER_NAME = "localhost"
_RELAXED = {"per_second": 10000, "burst_count": 10000}


def homeserver_config(folder: Path, port: int, secret: str) -> dict[str, Any]:
    """The config of a single, closed homeserver (see the module docstring)."""
    return {
        "server_name": SERVER_NAME,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(folder / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        # In memory: nothing of it must outlive the session, and no fsync per event.
        "database": {"name": "sqlite3", "args": {"database": ":memory:"}},
        "log_config": str(folder / "log.yaml"),
        "media_store_path": str(folder / "media"),
        "signing_key_path": str(folder / "signing.key"),
        "registration_shared_secret": secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "report_stats": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "enable_authenticated_media": True,
        "enable_media_repo": True,
        "url_preview_enabled": False,
        "presence": {"enabled": False},
        "bcrypt_rounds": 4,
        "enable_registration": False,
        "require_auth_for_profile_requests": False,
        "rc_message": _RELAXED,
        "rc_registration": _RELAXED,
        "rc_login": {
            "address": _RELAXED,
            "account": _RELAXED,
            "failed_attempts": _RELAXED,
        },
        "rc_joins": {"local": _RELAXED, "remote": _RELAXED},
        "rc_joins_per_room": _RELAXED,
        "rc_invites": {"per_room": _RELAXED, "per_user": _RELAXED, "per_issuer": _RELAXED},
        "rc_admin_redaction": _RELAXED,
        "rc_room_creation": _RELAXED,
        "rc_media_create": _RELAXED,
        "rc_presence": {"per_user": _RELAXED},
    }


LOG_CONFIG = {
    "version": 1,
    "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {
        "file": {
            "class": "logging.FileHandler",
            "formatter": "plain",
            "filename": "PLACEHOLDER",
        }
    },
    "root": {"level": "WARNING", "handlers": ["file"]},
    "disable_existing_loggers": False,
}


@dataclass
class Account:
    user_id: str
    access_token: str
    device_id: str
    password: str


class Synapse:
    """One Synapse subprocess (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()  # written into homeserver.yaml before it starts
        self.secret = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> Synapse:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = dict(LOG_CONFIG)
        log["handlers"] = {"file": {**LOG_CONFIG["handlers"]["file"]}}  # type: ignore[index]
        log["handlers"]["file"]["filename"] = str(self.folder / "homeserver.log")
        (self.folder / "log.yaml").write_text(yaml.safe_dump(log))
        config = self.folder / "homeserver.yaml"
        config.write_text(yaml.safe_dump(homeserver_config(self.folder, self.port, self.secret)))
        out = (self.folder / "stdout.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(config)],
            cwd=self.folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SYNAPSE_ASYNC_IO_REACTOR": "0"},
        )

        def answers() -> bool:
            with urllib.request.urlopen(f"{self.url}/_matrix/client/versions", timeout=2):
                return True

        wait_started(
            self.process, answers, timeout, "Synapse", tail=self.tail, stop=self.stop, interval=0.1
        )
        return self

    def tail(self) -> str:
        text = ""
        for name in ("stdout.log", "homeserver.log"):
            with contextlib.suppress(OSError):
                text += (self.folder / name).read_text(errors="replace")[-2000:]
        return text

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    # -- accounts ------------------------------------------------------------------------------
    def register(self, localpart: str, *, admin: bool = False) -> Account:
        """A new account through the shared-secret registration API."""
        path = f"{self.url}/_synapse/admin/v1/register"
        with urllib.request.urlopen(path, timeout=10) as response:
            nonce = json.load(response)["nonce"]
        password = secrets.token_hex(8)
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": _mac(self.secret, nonce, localpart, password, admin),
        }
        request = urllib.request.Request(
            path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                got = json.load(response)
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"registering {localpart}: {exc.read()!r}") from None
        return Account(got["user_id"], got["access_token"], got["device_id"], password)


def _mac(secret: str, nonce: str, user: str, password: str, admin: bool) -> str:
    """HMAC-SHA1 over nonce, user, password and admin flag, NUL-separated (the API's rule)."""
    mac = hmac.new(secret.encode(), digestmod=hashlib.sha1)
    mac.update(nonce.encode() + b"\x00" + user.encode() + b"\x00" + password.encode())
    mac.update(b"\x00" + (b"admin" if admin else b"notadmin"))
    return mac.hexdigest()
