"""Fixtures for provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.cassette import ReplayServer


@pytest.fixture
async def server() -> AsyncIterator[ReplayServer]:
    """A replay server on 127.0.0.1; fill `server.queue` before the first request."""
    async with ReplayServer() as srv:
        yield srv
