"""A real IRC server for the IRC channel's tests: ngircd (Debian's `ngircd` package) started
in a temporary directory on a free port, in the foreground (`-n`), no system service, and
stopped after. `.ci/install-servers.sh` installs it on CI; elsewhere the tests skip when it is
missing (and fail under CI=true).

An IRC operator `oper`/`operpass` can KILL (a dropped connection) and set modes anywhere
(`OperCanUseMode`). `set_password` rewrites the server password and rehashes (SIGHUP): new
connections must give it (`PASS`), those made before stay.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.kit.ports import free_port
from tests.kit.servers import wait_started
from tests.kit.until import until_sync

__all__ = ["OPER", "OPER_PASSWORD", "NgIrcd", "ngircd_binary"]

OPER, OPER_PASSWORD = "oper", "operpass"
SERVER_NAME = "irc.chatfn.test"


def ngircd_binary() -> str | None:
    return shutil.which("ngircd") or next(
        (p for p in ("/usr/sbin/ngircd", "/usr/local/sbin/ngircd") if os.path.exists(p)), None
    )


class NgIrcd:
    def __init__(self) -> None:
        binary = ngircd_binary()
        if binary is None:
            raise RuntimeError("ngircd is not installed (apt-get install ngircd)")
        self.binary = binary
        # ngircd started as root runs as nobody (it refuses root): its folder must be readable
        # by it for a rehash, so a folder of its own rather than pytest's private tmp_path.
        self.folder = Path(tempfile.mkdtemp(prefix="chatfn-ngircd-"))
        self.folder.chmod(0o755)
        self.port = free_port()
        self.password = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.folder / "ngircd.log"

    @property
    def config(self) -> Path:
        return self.folder / "ngircd.conf"

    def write_config(self) -> None:
        password = f"Password = {self.password}\n" if self.password else ""
        self.config.write_text(
            "[Global]\n"
            f"Name = {SERVER_NAME}\n"
            "Info = chatfn test server\n"
            "Listen = 127.0.0.1\n"
            f"Ports = {self.port}\n"
            "MotdPhrase = chatfn test server\n"
            f"PidFile = {self.folder / 'ngircd.pid'}\n"
            "HelpFile = /dev/null\n"
            "AdminInfo1 = chatfn tests\nAdminInfo2 = localhost\nAdminEMail = root@localhost\n"
            f"{password}"
            "[Limits]\nMaxNickLength = 30\nPingTimeout = 120\nPongTimeout = 20\n"
            "MaxConnectionsIP = 0\nConnectRetry = 5\nMaxPenaltyTime = 0\n"
            "[Options]\nPAM = no\nDNS = no\nIdent = no\nOperCanUseMode = yes\n"
            "[Operator]\n"
            f"Name = {OPER}\nPassword = {OPER_PASSWORD}\n"
        )
        self.config.chmod(0o644)

    def start(self, timeout: float = 15.0) -> None:
        self.write_config()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [self.binary, "-n", "-f", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

        def listens() -> bool:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True

        def tail() -> str:
            return self.log.read_text(errors="replace")[-500:]

        what = f"ngircd on {self.port}"
        wait_started(self.process, listens, timeout, what, tail=tail, stop=self.stop)

    def set_password(self, password: str) -> None:
        """The server password from now on ("" none): config rewritten, SIGHUP (rehash)."""
        assert self.process is not None
        self.password = password
        self.write_config()
        before = self.log.read_text(errors="replace").count("Re-reading configuration")
        self.process.send_signal(signal.SIGHUP)
        until_sync(
            lambda: self.log.read_text(errors="replace").count("Re-reading configuration") > before,
            10,
            "ngircd did not rehash",
        )

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
