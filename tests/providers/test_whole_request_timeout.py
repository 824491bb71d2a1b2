"""`models.<name>.timeout` bounds a whole request, not each read (issue 11 §4): a server that
trickles one byte a second never lets an SDK's read timeout fire, in every adapter."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from providers.errors import ProviderTimeout
from providers.factory import build_model
from providers.types import Message
from tests.fakes.protocols import model_config
from tests.fakes.raw_replay import RawReplayServer, raw


def trickle(content_type: str) -> web.StreamResponse:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        for _ in range(60):
            await response.write(b" ")  # JSON allows leading whitespace; SSE ignores blank
            # Kept: this test is about time itself. A byte every 0.5 s, well inside each read
            # timeout (1.5 s), is what keeps an SDK's own timeout from ever firing.
            await asyncio.sleep(0.5)
        return response

    return raw(handler)  # type: ignore[return-value]


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_trickling_server_is_cut_off_at_the_timeout(protocol: str, stream: bool) -> None:
    async with RawReplayServer() as server:
        cfg = model_config(protocol, server.url, stream=stream).model_copy(update={"timeout": 1.5})  # type: ignore[arg-type]
        model = build_model("m", cfg)
        server.queue = [trickle("text/event-stream" if stream else "application/json")] * 2
        started = time.monotonic()
        with pytest.raises(ProviderTimeout):
            messages = [Message(role="user", content="hi")]
            if stream:
                async for _ in model.stream(messages):
                    pass
            else:
                await model.complete(messages)
        elapsed = time.monotonic() - started
        await model.aclose()
    assert 1.4 < elapsed < 3.0, elapsed
