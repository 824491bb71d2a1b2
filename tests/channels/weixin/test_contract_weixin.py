"""The channel contract (tests/channels/contract.py) against the WeChat channel and a local
iLink (weixin_fake.py: the protocol as Tencent's openclaw-weixin plugin, AstrBot's weixin_oc
and Hermes Agent speak it). WeChat's own cases: test_weixin.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.weixin.weixin_driver import WeixinDriver
from tests.channels.weixin.weixin_fake import FakeIlink


class TestWeixinContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[WeixinDriver]:
        async with FakeIlink() as fake:
            driver = WeixinDriver(fake)
            yield driver
            await driver.detach()
