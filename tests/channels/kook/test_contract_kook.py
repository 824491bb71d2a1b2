"""The channel contract (tests/channels/contract.py) against the KOOK channel and a local KOOK
(kook_fake.py: HTTP API and compressed WebSocket gateway, shapes from developer.kookapp.cn).
KOOK's own cases: test_kook.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.kook.kook_driver import KookDriver
from tests.channels.kook.kook_fake import FakeKook


class TestKookContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[KookDriver]:
        async with FakeKook() as fake:
            driver = KookDriver(fake)
            yield driver
            await driver.detach()
