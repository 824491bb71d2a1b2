"""The channel contract (tests/channels/contract.py) against the Mattermost channel and a
local server (mattermost_fake.py). Mattermost's own cases: test_mattermost.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.mattermost.mattermost_driver import MattermostDriver
from tests.channels.mattermost.mattermost_fake import FakeMattermost


class TestMattermostContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[MattermostDriver]:
        async with FakeMattermost() as fake:
            driver = MattermostDriver(fake)
            yield driver
            await driver.detach()
