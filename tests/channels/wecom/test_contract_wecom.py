"""The channel contract (tests/channels/contract.py) against the WeCom channel in app mode and
a local WeCom (wecom_fake.py: the server API and the encrypted callback, shapes from
developer.work.weixin.qq.com). WeCom's own cases: test_wecom.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("cryptography")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.wecom.wecom_driver import WecomDriver  # noqa: E402
from tests.channels.wecom.wecom_fake import FakeWecom  # noqa: E402


class TestWecomContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[WecomDriver]:
        async with FakeWecom() as fake:
            driver = WecomDriver(fake)
            yield driver
            await driver.detach()
