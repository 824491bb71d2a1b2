"""Review findings on the provider adapters: each test pins one defect that was fixed.

Every adapter promises the tool loop only ProviderError subclasses (providers/base.py), so a
server answering garbage (a broken proxy, a truncated body) must not surface as a JSON, pydantic
or attribute error; wrappers must release the inner model's HTTP client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

import pytest
from aiohttp import web

from providers.base import ChatModel, collect
from providers.config import ModelConfig
from providers.errors import ProviderAuthError, ProviderError
from providers.factory import build_model
from providers.text_tools.model import TextToolsModel
from providers.types import LLMResponse, Message, ModelCapabilities, ToolDefinition
from tests.fakes.cassette import ReplayServer

USER = [Message(role="user", content="hi")]
TOOLS = [ToolDefinition("f", "d", {"type": "object", "properties": {"a": {"type": "string"}}})]
BASE = {"openai": "/v1", "anthropic": "", "gemini": ""}
MODEL = {"openai": "gpt-test", "anthropic": "claude-test", "gemini": "gemini-2.5-flash"}


@pytest.fixture
async def server() -> AsyncIterator[ReplayServer]:
    async with ReplayServer() as srv:
        yield srv


def reply(text: str, content_type: str = "application/json"):
    return lambda _r: web.Response(text=text, content_type=content_type)


def model_for(provider: str, server: ReplayServer) -> ChatModel:
    cfg = ModelConfig(
        provider=provider,  # type: ignore[arg-type]
        model=MODEL[provider],
        api_key="k",
        base_url=server.url + BASE[provider],
        max_retries=0,
        native_tools=True,
    )
    return build_model("t", cfg)


# -- malformed answers are ProviderErrors -------------------------------------------------------

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


# -- OpenAI-compatible servers that send arguments as a JSON object -----------------------------


def _call_completion(arguments: object) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return json.dumps({"choices": [choice]})


async def test_openai_object_arguments_become_json_text(server: ReplayServer) -> None:
    server.queue = [reply(_call_completion({"a": "x"}))]
    model = model_for("openai", server)
    response = await model.complete(USER, TOOLS)
    await model.aclose()
    call = response.tool_calls[0]
    assert isinstance(call.arguments, str)
    assert call.parsed_arguments() == {"a": "x"}


async def test_openai_streamed_object_arguments_become_json_text(server: ReplayServer) -> None:
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": "x"}},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    server.queue = [reply(body, "text/event-stream")]
    model = model_for("openai", server)
    response = await collect(model.stream(USER, TOOLS))
    await model.aclose()
    assert response.tool_calls[0].parsed_arguments() == {"a": "x"}


# -- Anthropic without any credential fails at start, as OpenAI and Gemini do --------------------


def test_anthropic_without_key_is_auth_error_at_build(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    cfg = ModelConfig(provider="anthropic", model="claude-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        build_model("claude", cfg)


# -- prompt-mode wrapper releases the inner client ----------------------------------------------


class _Inner(ChatModel):
    provider = "fake"

    def __init__(self) -> None:
        super().__init__("m", "m", ModelCapabilities(native_tools=False))
        self.closed = False

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        return LLMResponse(content="ok")

    async def aclose(self) -> None:
        self.closed = True


async def test_text_tools_model_closes_inner_model() -> None:
    inner = _Inner()
    await TextToolsModel(inner).aclose()
    assert inner.closed


# -- "auto" downgrade: a server refusing a field *inside* a tool does support tools ---------------


def test_extra_input_inside_a_tool_is_not_tools_not_supported() -> None:
    from providers.openai_errors import tools_not_supported

    detail = {
        "detail": [
            {
                "type": "extra_forbidden",
                "msg": "Extra inputs are not permitted",
                "loc": ["body", "tools", 0, "function", "strict"],
                "input": True,
            }
        ]
    }
    assert not tools_not_supported(f"Error code: 422 {json.dumps(detail)}")
    detail["detail"][0]["loc"] = ["body", "tools"]
    assert tools_not_supported(f"Error code: 422 {json.dumps(detail)}")
