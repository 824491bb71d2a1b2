"""The channel contract (tests/channels/contract.py) against the Slack channel and a local
Slack (slack_fake.py here: Web API + Socket Mode, shapes from api.slack.com), through
the real slack_sdk client. Slack's own cases: test_slack.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("slack_sdk")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.slack.slack_driver import SlackDriver  # noqa: E402
from tests.channels.slack.slack_fake import FakeSlack  # noqa: E402


class TestSlackContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[SlackDriver]:
        async with FakeSlack() as fake:
            driver = SlackDriver(fake)
            yield driver
            await driver.detach()
