"""Fixtures for the runtime tests: a local server the real SDKs talk to."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.raw_replay import RawReplayServer


@pytest.fixture
async def server() -> AsyncIterator[RawReplayServer]:
    """A replay server on 127.0.0.1 that can also cut a stream off (`raw` handlers)."""
    async with RawReplayServer() as srv:
        yield srv
