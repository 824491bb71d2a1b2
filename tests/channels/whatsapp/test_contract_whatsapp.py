"""The channel contract (tests/channels/contract.py) against the WhatsApp channel and a local
Cloud API (whatsapp_fake.py). WhatsApp's own cases: test_whatsapp.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.whatsapp.whatsapp_driver import WhatsAppDriver
from tests.channels.whatsapp.whatsapp_fake import FakeWhatsApp


class TestWhatsAppContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[WhatsAppDriver]:
        async with FakeWhatsApp() as fake:
            driver = WhatsAppDriver(fake)
            yield driver
            await driver.detach()
