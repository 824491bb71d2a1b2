"""The channel contract (tests/channels/contract.py) against the Matrix channel and a real
Synapse homeserver (started once per session: tests/channels/matrix/synapse_server.py), people
speaking through real matrix-nio clients, the bot behind a small proxy for the 429 and the
dropped connection (matrix_proxy.py). Matrix's own cases: test_matrix.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("nio")

from tests.channels.contract import ChannelContract  # noqa: E402
from tests.channels.matrix.matrix_driver import MatrixDriver  # noqa: E402
from tests.channels.matrix.matrix_proxy import MatrixProxy  # noqa: E402
from tests.channels.matrix.synapse_server import Synapse  # noqa: E402

pytestmark = pytest.mark.services


class TestMatrixContract(ChannelContract):
    @pytest.fixture
    async def driver(self, synapse: Synapse, tmp_path: Path) -> AsyncIterator[MatrixDriver]:
        async with MatrixProxy(synapse.url) as proxy:
            driver = await MatrixDriver.create(synapse, proxy, tmp_path / "matrix-store")
            yield driver
            await driver.close()
