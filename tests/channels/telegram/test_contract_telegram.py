"""The channel contract (tests/channels/contract.py) against the Telegram channel and a local
Bot API server (tests/channels/telegram/telegram_fake.py, shapes from https://core.telegram.org/bots/api),
through the real python-telegram-bot client. Telegram's own cases: test_telegram.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("telegram")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.telegram.telegram_driver import TelegramDriver  # noqa: E402
from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402


class TestTelegramContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[TelegramDriver]:
        async with FakeTelegram() as fake:
            driver = TelegramDriver(fake)
            yield driver
            await driver.detach()
