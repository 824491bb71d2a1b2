"""The channel contract (tests/channels/contract.py) against the LINE channel, driving the
official SDK (line-bot-sdk v3) against a local Messaging API (line_fake.py). LINE's own
cases: test_line.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("linebot.v3")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.line.line_driver import LineDriver  # noqa: E402
from tests.channels.line.line_fake import FakeLine  # noqa: E402


class TestLineContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[LineDriver]:
        async with FakeLine() as fake:
            driver = LineDriver(fake)
            yield driver
            await driver.detach()
