"""The channel contract (tests/channels/contract.py) against the IRC channel and a real IRC
server, ngircd, started by the tests (irc_driver.py). IRC's own cases: test_irc.py."""

from __future__ import annotations

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.irc.irc_driver import IrcDriver

pytestmark = pytest.mark.services


class TestIrcContract(ChannelContract):
    @pytest.fixture
    async def driver(self, irc: IrcDriver) -> IrcDriver:
        return irc
