"""The e-mail channel's tests run against real mail servers (mail_servers.py), one set for the
session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.channels.email.email_driver import EmailDriver
from tests.channels.email.mail_servers import MailServers, dovecot_binary


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true installs it (.ci/install-servers.sh), so this is a failure")
    pytest.skip(reason)


def accounts() -> list[str]:
    """The drivers' accounts (email_driver.py: `bot<n>`, `u<native>.<n>`), made before the
    servers start: Dovecot notices a new account only up to a second later."""
    natives = [str(n) for n in (*range(1001, 1021), *range(3001, 3011))]
    return [f"bot{n}" for n in range(1, 61)] + [f"u{u}.{n}" for u in natives for n in range(1, 61)]


@pytest.fixture(scope="session")
def mail_servers() -> Iterator[MailServers]:
    if dovecot_binary() is None:
        _unavailable("dovecot is not installed (apt-get install dovecot-imapd)")
    try:
        import aiosmtpd  # noqa: F401
    except ImportError as exc:
        _unavailable(f"aiosmtpd is not installed ({exc}): the test extra has it")
    servers = MailServers()
    try:
        servers.start(users=accounts())
    except RuntimeError as exc:
        servers.stop()
        _unavailable(f"dovecot did not start: {exc}")
    yield servers
    servers.stop()


@pytest.fixture
async def mail(mail_servers: MailServers) -> AsyncIterator[EmailDriver]:
    driver = EmailDriver(mail_servers)
    yield driver
    await driver.close()
