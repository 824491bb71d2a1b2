"""The channel contract (tests/channels/contract.py) against the Feishu channel and a local
open platform (tests/channels/feishu/feishu_fake.py: REST + the long connection's protobuf frames,
shapes from open.feishu.cn), through the real lark-oapi client. Feishu's own cases:
test_feishu.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("lark_oapi")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.feishu.feishu_driver import FeishuDriver  # noqa: E402
from tests.channels.feishu.feishu_fake import FakeFeishu  # noqa: E402


class TestFeishuContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[FeishuDriver]:
        async with FakeFeishu() as fake:
            driver = FeishuDriver(fake)
            yield driver
            await driver.detach()
