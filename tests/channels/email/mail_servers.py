"""Real mail servers for the e-mail channel's tests, started in a temporary directory on free
ports and stopped after (no system service):

- Dovecot (Debian's `dovecot-imapd`) serves IMAP (with IDLE) over Maildirs, its users and
  passwords in a passwd-file (`account`; a password changed takes effect at the next login);
- an SMTP server, aiosmtpd (a standards-complete SMTP server from PyPI), as the MTA: it
  takes mail on submission with AUTH PLAIN/LOGIN (the same passwd-file), refuses a
  recipient it does not serve, and delivers each message to the recipient's Maildir through
  Dovecot's own delivery agent (dovecot-lda), as Postfix's `mailbox_command` would.

`.ci/install-servers.sh` installs Dovecot on CI; elsewhere the tests skip when it is missing
(and fail under CI=true).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

from tests.kit.ports import free_port
from tests.kit.servers import wait_started

__all__ = ["DOMAIN", "MailServers", "dovecot_binary"]

DOMAIN = "mail.test"
LDA = "/usr/lib/dovecot/dovecot-lda"


def dovecot_binary() -> str | None:
    found = shutil.which("dovecot") or "/usr/sbin/dovecot"
    return found if os.path.exists(found) and os.path.exists(LDA) else None


class MailServers:
    def __init__(self) -> None:
        binary = dovecot_binary()
        if binary is None:
            raise RuntimeError("dovecot is not installed (apt-get install dovecot-imapd)")
        self.binary = binary
        self.folder = Path(tempfile.mkdtemp(prefix="chatfn-mail-"))
        self.folder.chmod(0o755)
        for sub in ("run", "state", "mail"):
            (self.folder / sub).mkdir()
        self.imap_port = free_port()
        self.passwords: dict[str, str] = {}
        self._mtime = 0.0
        self.sequence = 0  # the id of the last Received line the MTA added
        self.process: subprocess.Popen[bytes] | None = None
        self.smtp: Any = None
        self.smtp_port = 0
        self.delivered: list[tuple[str, bytes]] = []  # (recipient, message) as handed to LDA
        root = os.geteuid() == 0
        # As root, Dovecot's login processes run as its own users and the mail as nobody.
        self.mail_user = pwd.getpwnam("nobody") if root else pwd.getpwuid(os.getuid())
        self.internal = (
            ("dovecot", "dovecot", "dovenull")
            if root
            else (
                pwd.getpwuid(os.getuid()).pw_name,
                pwd.getpwuid(os.getuid()).pw_name,
                pwd.getpwuid(os.getuid()).pw_name,
            )
        )
        if root:
            os.chown(self.folder / "mail", self.mail_user.pw_uid, self.mail_user.pw_gid)

    @property
    def config(self) -> Path:
        return self.folder / "dovecot.conf"

    def write_config(self) -> None:
        f = self.folder
        internal_user, internal_group, login_user = self.internal
        services = (
            ""
            if os.geteuid() == 0
            else "".join(
                f"service {s} {{\n  user = {internal_user}\n}}\n"
                for s in ("auth", "stats", "anvil")
            )
        )
        self.config.write_text(
            f"base_dir = {f}/run\nstate_dir = {f}/state\nlog_path = {f}/dovecot.log\n"
            "protocols = imap\nlisten = 127.0.0.1\nssl = no\n"
            "disable_plaintext_auth = no\nauth_mechanisms = plain login\nauth_verbose = yes\n"
            "first_valid_uid = 0\n"
            f"default_internal_user = {internal_user}\n"
            f"default_internal_group = {internal_group}\n"
            f"default_login_user = {login_user}\n"
            f"mail_location = maildir:{f}/mail/%n\n"
            "lda_mailbox_autocreate = yes\n"
            "passdb {\n  driver = passwd-file\n"
            f"  args = scheme=PLAIN username_format=%n {f}/passwd\n}}\n"
            "userdb {\n  driver = static\n"
            f"  args = uid={self.mail_user.pw_uid} gid={self.mail_user.pw_gid}"
            f" home={f}/mail/%n\n}}\n"
            "service imap-login {\n"
            f"  inet_listener imap {{\n    address = 127.0.0.1\n    port = {self.imap_port}\n  }}\n"
            "  inet_listener imaps {\n    port = 0\n  }\n}\n"
            f"{services}"
        )

    def account(self, user: str, password: str = "secret") -> str:
        """`user@mail.test` with `password`. Dovecot reads the passwd-file again when it has
        changed, but looks at most once a second: an account made a moment after a login may
        be unknown for up to a second (see `start`, which makes the tests' accounts first)."""
        if self.passwords.get(user) == password:
            return f"{user}@{DOMAIN}"
        self.passwords[user] = password
        lines = [f"{u}:{{PLAIN}}{p}::::::" for u, p in self.passwords.items()]
        path = self.folder / "passwd"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o644)
        # Dovecot reads the file again when its mtime changes, in whole seconds: two changes in
        # one second would look like one. Each change gets a later second.
        self._mtime = max(time.time(), self._mtime + 1.0)
        os.utime(path, (self._mtime, self._mtime))
        return f"{user}@{DOMAIN}"

    def start(self, timeout: float = 20.0, users: list[str] | None = None) -> None:
        """Start both servers with the accounts `users` (password "secret") made first."""
        self.write_config()
        self.passwords.update(dict.fromkeys(users or [], "secret"))
        self.passwords["postmaster"] = ""
        self.account("postmaster")
        log = (self.folder / "stdout.log").open("wb")
        self.process = subprocess.Popen(
            [self.binary, "-F", "-c", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

        def greets() -> bool:
            with socket.create_connection(("127.0.0.1", self.imap_port), timeout=0.5) as s:
                return s.recv(100).startswith(b"* OK")

        what = f"dovecot on {self.imap_port}"
        wait_started(self.process, greets, timeout, what, tail=self._tail, stop=self.stop)
        self._start_smtp()

    def _tail(self) -> str:
        found = [p for p in (self.folder / "stdout.log", self.folder / "dovecot.log") if p.exists()]
        return " | ".join(p.read_text(errors="replace")[-500:] for p in found)

    # -- SMTP ------------------------------------------------------------------------------
    def _start_smtp(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        servers = self

        def authenticate(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> Any:
            if not isinstance(data, LoginPassword):
                return AuthResult(success=False, handled=False)
            user = data.login.decode().split("@", 1)[0]
            ok = servers.passwords.get(user) == data.password.decode()
            return AuthResult(success=ok, handled=False)

        class Deliver:
            async def handle_RCPT(
                self, server: Any, session: Any, envelope: Any, address: str, options: Any
            ) -> str:
                local, _, domain = address.partition("@")
                if domain.lower() != DOMAIN or local not in servers.passwords:
                    return "550 5.1.1 no such user here"
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                # As an MTA does: a Received line on top, its id the order of delivery.
                servers.sequence += 1
                received = (
                    f"Received: from {session.host_name or 'client'} by {DOMAIN} (chatfn tests)"
                    f" id {servers.sequence:08d}; {formatdate()}\r\n"
                ).encode()
                for rcpt in envelope.rcpt_tos:
                    body = received + (envelope.original_content or envelope.content)
                    servers.delivered.append((rcpt, body))
                    code = await servers.lda(rcpt.split("@", 1)[0], body, envelope.mail_from)
                    if code != 0:
                        return f"451 4.3.0 delivery to {rcpt} failed ({code})"
                return "250 OK delivered"

        self.smtp_port = free_port()
        self.smtp = Controller(
            Deliver(),
            hostname="127.0.0.1",
            port=self.smtp_port,
            authenticator=authenticate,
            auth_required=True,
            auth_require_tls=False,
        )
        self.smtp.start()

    async def lda(self, user: str, message: bytes, sender: str) -> int:
        """Deliver `message` to `user`'s INBOX with dovecot-lda (its exit code: 0 delivered)."""
        process = await asyncio.create_subprocess_exec(
            LDA,
            "-c",
            str(self.config),
            "-d",
            user,
            "-f",
            sender or "MAILER-DAEMON",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await process.communicate(message)
        return process.returncode or 0

    def stop(self) -> None:
        if self.smtp is not None:
            self.smtp.stop()
            self.smtp = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if not os.environ.get("KEEP_MAIL"):
            shutil.rmtree(self.folder, ignore_errors=True)
