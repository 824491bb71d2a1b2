"""The channel contract (tests/channels/contract.py) against the Discord channel: discord.py
against a local Discord (discord_fake.py here, shapes from Discord's API reference:
tests/fixtures/discord/README.md). Every feature applies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.discord.discord_driver import DiscordDriver
from tests.channels.discord.discord_fake import FakeDiscord

pytest.importorskip("discord")


class TestDiscordContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[DiscordDriver]:
        async with FakeDiscord() as server:
            driver = DiscordDriver(server)
            yield driver
            await driver.detach()
