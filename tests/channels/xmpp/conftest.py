"""The XMPP channel's tests run against a real Prosody (prosody_server.py), one for the session."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.channels.xmpp.prosody_server import Prosody, prosody_binary
from tests.channels.xmpp.xmpp_driver import XmppDriver


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true installs it (.ci/install-servers.sh), so this is a failure")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def prosody() -> Iterator[Prosody]:
    if prosody_binary() is None:
        _unavailable("prosody is not installed (apt-get install prosody)")
    try:
        import slixmpp  # noqa: F401
    except ImportError as exc:
        _unavailable(f"slixmpp is not installed ({exc}): pip install 'chatfn[xmpp]'")
    server = Prosody()
    try:
        server.start()
        server.account("bot")
        server.account("watcher")
    except RuntimeError as exc:
        server.stop()
        _unavailable(f"prosody did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture
async def xmpp(prosody: Prosody) -> AsyncIterator[XmppDriver]:
    driver = await XmppDriver(prosody).open()
    yield driver
    await driver.close()
