"""The channel contract (tests/channels/contract.py) against the WeChat Official Account
channel (safe mode, customer-service messages allowed) and a local platform
(wechat_mp_fake.py). The Official Account's own cases: test_wechat_mp.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("cryptography")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.wechat_mp.wechat_mp_driver import WechatMpDriver  # noqa: E402
from tests.channels.wechat_mp.wechat_mp_fake import FakeWechatMp  # noqa: E402


class TestWechatMpContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[WechatMpDriver]:
        async with FakeWechatMp() as fake:
            driver = WechatMpDriver(fake)
            yield driver
            await driver.detach()
