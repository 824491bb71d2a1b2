"""The channel contract (tests/channels/contract.py) against the Teams channel and a local
Bot Framework (teams_fake.py). Teams' own cases: test_teams.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.teams.teams_driver import TeamsDriver
from tests.channels.teams.teams_fake import FakeTeams


class TestTeamsContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[TeamsDriver]:
        async with FakeTeams() as fake:
            driver = TeamsDriver(fake)
            yield driver
            await driver.detach()
