"""A real XMPP server for the XMPP channel's tests: Prosody (Debian's `prosody` package)
started in a temporary directory on free ports, in the foreground (`-F`), no system service,
and stopped after. `.ci/install-servers.sh` installs it on CI; elsewhere the tests skip when
it is missing (and fail under CI=true).

One virtual host `localhost` (plain connections allowed: no certificates in a test), a MUC
component `conference.localhost` (rooms made on first join, unlocked, with mod_muc_mam: the
room stamps XEP-0359 stanza ids), mod_mam for one-to-one stanza ids, and an HTTP upload
service (XEP-0363, mod_http_file_share) at `upload.localhost` on a free HTTP port. Accounts
are made with `prosodyctl adduser` (`account`), their passwords changed with
`prosodyctl passwd`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.kit.ports import free_port
from tests.kit.servers import wait_started

__all__ = ["DOMAIN", "MUC", "Prosody", "prosody_binary"]

DOMAIN = "localhost"
MUC = "conference.localhost"


def prosody_binary() -> str | None:
    return shutil.which("prosody") or (
        "/usr/bin/prosody" if os.path.exists("/usr/bin/prosody") else None
    )


class Prosody:
    def __init__(self) -> None:
        binary = prosody_binary()
        ctl = shutil.which("prosodyctl") or "/usr/bin/prosodyctl"
        if binary is None or not os.path.exists(ctl):
            raise RuntimeError("prosody is not installed (apt-get install prosody)")
        self.binary, self.ctl = binary, ctl
        self.folder = Path(tempfile.mkdtemp(prefix="chatfn-prosody-"))
        (self.folder / "data").mkdir()
        self.port = free_port()
        self.http_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.accounts: dict[str, str] = {}

    @property
    def config(self) -> Path:
        return self.folder / "prosody.cfg.lua"

    def write_config(self) -> None:
        f = self.folder
        root = "run_as_root = true\n" if os.geteuid() == 0 else ""
        self.config.write_text(
            f'pidfile = "{f}/prosody.pid"\n'
            f'data_path = "{f}/data"\n'
            f'certificates = "{f}/certs"\n'
            f"{root}"
            f'log = {{ info = "{f}/prosody.log"; error = "{f}/prosody.err"; }}\n'
            f"c2s_ports = {{ {self.port} }}\n"
            'c2s_interfaces = { "127.0.0.1" }\n'
            'interfaces = { "127.0.0.1" }\n'
            "s2s_ports = { }\n"
            f"http_ports = {{ {self.http_port} }}\n"
            'http_interfaces = { "127.0.0.1" }\n'
            "https_ports = { }\n"
            "c2s_require_encryption = false\n"
            "allow_unencrypted_plain_auth = true\n"
            'authentication = "internal_hashed"\n'
            'modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "mam"; }\n'
            'modules_disabled = { "s2s"; "tls"; "posix"; }\n'
            'archive_expires_after = "never"\n'
            f'VirtualHost "{DOMAIN}"\n'
            f'Component "{MUC}" "muc"\n'
            '  modules_enabled = { "muc_mam" }\n'
            "  muc_room_locking = false\n"
            "  muc_room_default_history_length = 20\n"
            f'Component "upload.{DOMAIN}" "http_file_share"\n'
            f'  http_external_url = "http://127.0.0.1:{self.http_port}/"\n'
            '  http_host = "127.0.0.1"\n'
            "  http_file_share_size_limit = 1048576\n"
        )

    def _ctl(self, *args: str, stdin: str = "") -> None:
        done = subprocess.run(
            [self.ctl, "--config", str(self.config), *args],
            input=stdin.encode(),
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"prosodyctl {' '.join(args)}: {done.stdout[-300:]!r}")

    def account(self, user: str, password: str = "secret") -> str:
        """`user@localhost` with `password`, made once."""
        jid = f"{user}@{DOMAIN}"
        if self.accounts.get(jid) != password:
            verb = "passwd" if jid in self.accounts else "adduser"
            self._ctl(verb, jid, stdin=f"{password}\n{password}\n")
            self.accounts[jid] = password
        return jid

    def start(self, timeout: float = 20.0) -> None:
        self.write_config()
        log = (self.folder / "stdout.log").open("wb")
        self.process = subprocess.Popen(
            [self.binary, "--config", str(self.config), "-F"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

        def listens() -> bool:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True

        what = f"prosody on {self.port}"
        wait_started(self.process, listens, timeout, what, tail=self._tail, stop=self.stop)

    def _tail(self) -> str:
        found = [p for p in (self.folder / "stdout.log", self.folder / "prosody.err") if p.exists()]
        return " | ".join(p.read_text(errors="replace")[-400:] for p in found)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)
