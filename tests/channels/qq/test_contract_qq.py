"""The channel contract (tests/channels/contract.py) against the QQ channel and a local QQ
(tests/channels/qq/qq_fake.py: token, OpenAPI and WebSocket gateway, shapes from
bot.q.qq.com/wiki), twice: QQ groups with C2C chats, and guild channels with guild DMs. QQ's
own cases: test_qq.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.qq.qq_driver import QQDriver
from tests.channels.qq.qq_fake import FakeQQ


class TestQQGroupsContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[QQDriver]:
        async with FakeQQ() as fake:
            driver = QQDriver(fake, "qq")
            yield driver
            await driver.detach()


class TestQQGuildContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[QQDriver]:
        async with FakeQQ() as fake:
            driver = QQDriver(fake, "guild")
            yield driver
            await driver.detach()
