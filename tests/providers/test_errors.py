"""One HTTP-status mapping shared by every adapter, and every adapter turning a malformed answer
(a broken proxy, a truncated body) into a ProviderError, never a JSON, pydantic or attribute
error."""

from __future__ import annotations

import pytest

from providers.base import collect
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    error_for_status,
)
from providers.types import Message, ToolDefinition
from tests.fakes.cassette import ReplayServer
from tests.providers.helpers import MODEL, model_for, reply

USER = [Message(role="user", content="hi")]
TOOLS = [ToolDefinition("f", "d", {"type": "object", "properties": {"a": {"type": "string"}}})]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ProviderBadRequest),
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (404, ProviderBadRequest),
        (408, ProviderTimeout),
        (422, ProviderBadRequest),
        (429, ProviderRateLimited),
        (500, ProviderUnavailable),
        (503, ProviderUnavailable),
        (504, ProviderTimeout),
        (529, ProviderUnavailable),
    ],
)
def test_error_for_status(status: int, kind: type) -> None:
    err = error_for_status(status, "boom", "p")
    assert type(err) is kind and (err.status, err.provider, str(err)) == (status, "p", "boom")


MALFORMED = {
    "invalid json": ("{not json", "application/json"),
    "wrong shape": ('{"choices": "x", "content": 5, "candidates": 5}', "application/json"),
    "html page": ("<html>bad gateway</html>", "text/html"),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("case", list(MALFORMED))
async def test_malformed_complete_is_provider_error(
    server: ReplayServer, provider: str, case: str
) -> None:
    server.queue = [reply(*MALFORMED[case])]
    model = model_for(provider, server)
    try:
        with pytest.raises(ProviderError):
            await model.complete(USER, TOOLS)
    finally:
        await model.aclose()


STREAMS = {
    "invalid json": {p: "data: {not json\n\n" for p in MODEL},
    "wrong shape": {
        "openai": 'data: {"choices": "x"}\n\n',
        "anthropic": 'event: message_start\ndata: {"type": "message_start", "message": 5}\n\n',
        "gemini": 'data: {"candidates": 5}\n\n',
    },
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("case", list(STREAMS))
async def test_malformed_stream_is_provider_error(
    server: ReplayServer, provider: str, case: str
) -> None:
    server.queue = [reply(STREAMS[case][provider], "text/event-stream")]
    model = model_for(provider, server)
    try:
        with pytest.raises(ProviderError):
            await collect(model.stream(USER, TOOLS))
    finally:
        await model.aclose()
