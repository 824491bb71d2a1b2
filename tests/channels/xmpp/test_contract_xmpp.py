"""The channel contract (tests/channels/contract.py) against the XMPP channel and a real XMPP
server, Prosody, started by the tests (xmpp_driver.py). XMPP's own cases: test_xmpp.py."""

from __future__ import annotations

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.xmpp.xmpp_driver import XmppDriver

pytestmark = pytest.mark.services


class TestXmppContract(ChannelContract):
    @pytest.fixture
    async def driver(self, xmpp: XmppDriver) -> XmppDriver:
        return xmpp
