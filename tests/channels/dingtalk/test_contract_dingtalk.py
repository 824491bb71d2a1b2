"""The channel contract (tests/channels/contract.py) against the DingTalk channel and a local
DingTalk (tests/channels/dingtalk/dingtalk_fake.py: the OpenAPI and the Stream protocol,
shapes from open.dingtalk.com), through the real dingtalk-stream SDK. DingTalk's own cases:
test_dingtalk.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("dingtalk_stream")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.dingtalk.dingtalk_driver import DingTalkDriver  # noqa: E402
from tests.channels.dingtalk.dingtalk_fake import FakeDingTalk  # noqa: E402


class TestDingTalkContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[DingTalkDriver]:
        async with FakeDingTalk() as fake:
            driver = DingTalkDriver(fake)
            yield driver
            await driver.detach()
