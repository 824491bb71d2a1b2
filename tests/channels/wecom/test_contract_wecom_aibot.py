"""The channel contract (tests/channels/contract.py) against the WeCom channel in `mode:
aibot` (the intelligent robot, its streaming reply) and the robot's side of a local WeCom
(wecom_fake.py's FakeAibot)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("cryptography")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.wecom.wecom_driver import AibotDriver  # noqa: E402
from tests.channels.wecom.wecom_fake import FakeAibot  # noqa: E402


class TestWecomAibotContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[AibotDriver]:
        async with FakeAibot() as fake:
            driver = AibotDriver(fake)
            yield driver
            await driver.detach()
