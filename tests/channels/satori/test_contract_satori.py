"""The channel contract (tests/channels/contract.py) against the Satori channel and a local
Satori server (satori_fake.py). Satori's own cases: test_satori.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.satori.satori_driver import SatoriDriver
from tests.channels.satori.satori_fake import FakeSatori


class TestSatoriContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[SatoriDriver]:
        async with FakeSatori() as fake:
            driver = SatoriDriver(fake)
            yield driver
            await driver.detach()
