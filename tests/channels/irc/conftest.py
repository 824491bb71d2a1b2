"""The IRC channel's tests run against a real ngircd (ngircd_server.py), one for the session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.channels.irc.irc_driver import IrcDriver
from tests.channels.irc.ngircd_server import NgIrcd, ngircd_binary


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true installs it (.ci/install-servers.sh), so this is a failure")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ngircd() -> Iterator[NgIrcd]:
    if ngircd_binary() is None:
        _unavailable("ngircd is not installed (apt-get install ngircd)")
    server = NgIrcd()
    try:
        server.start()
    except RuntimeError as exc:
        _unavailable(f"ngircd did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture
async def irc(ngircd: NgIrcd) -> AsyncIterator[IrcDriver]:
    driver = await IrcDriver(ngircd).open()
    yield driver
    await driver.close()
