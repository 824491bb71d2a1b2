"""What the OpenAI-compatible adapter puts in the request body for `strict_tools` and
`thinking`, checked on the wire: the real `openai` SDK posts to a local server that records it."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from providers.config import ModelConfig
from providers.openai_compat import OpenAICompatModel
from providers.types import Message, ToolDefinition
from tests.fakes.cassette import ReplayServer, openai_chat_response
from tests.fakes.raw_replay import json_reply
from tests.providers.helpers import chunk, sse, sse_response


class Strictable(BaseModel):
    city: str = Field(description="City name")
    unit: str | None = None


class Open(BaseModel):
    tags: dict[str, str]


STRICTABLE = ToolDefinition("weather", "Weather.", Strictable.model_json_schema())
OPEN = ToolDefinition("tag", "Tag things.", Open.model_json_schema())
HELLO = [Message(role="user", content="hi")]


async def _send(
    server: ReplayServer,
    *,
    model: str = "gpt-4o",
    openai_host: bool = False,
    tools: list[ToolDefinition] | None = None,
    stream: bool = False,
    **cfg: Any,
) -> dict[str, Any]:
    """One request; returns the JSON body the server received. `openai_host` configures
    api.openai.com as base_url but injects a client pointed at the local server, so the
    adapter's OpenAI-only behaviour is exercised on the wire."""
    server.queue.append(json_reply(openai_chat_response("ok", model=model)))
    base_url = "https://api.openai.com/v1" if openai_host else f"{server.url}/v1"
    config = ModelConfig(provider="openai", model=model, api_key="k", base_url=base_url, **cfg)
    client = AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
    m = OpenAICompatModel("t", config, client=client)
    try:
        if stream:
            server.queue[-1] = lambda _r: _stream_ok()
            [e async for e in m.stream(HELLO, tools)]
        else:
            await m.complete(HELLO, tools)
    finally:
        await client.close()
    return server.received[-1].body


def _stream_ok() -> web.Response:
    return sse_response(sse([chunk({"content": "ok"}, "stop"), "[DONE]"]))


# ------------------------------------------------------------------------- strict tools


async def test_openai_host_sends_strict_schema(server: ReplayServer) -> None:
    body = await _send(server, openai_host=True, tools=[STRICTABLE, OPEN])
    strict, open_ = (t["function"] for t in body["tools"])
    assert strict["strict"] is True
    params = strict["parameters"]
    assert params["additionalProperties"] is False
    assert params["required"] == ["city", "unit"]  # the nullable optional becomes required
    assert "title" not in params and "default" not in params["properties"]["unit"]
    # A free-form dict cannot be strict: sent without the flag, not weakened.
    assert "strict" not in open_ and open_["parameters"]["properties"]["tags"]["type"] == "object"


async def test_compatible_server_gets_the_schema_compacted_not_strict(
    server: ReplayServer,
) -> None:
    body = await _send(server, tools=[STRICTABLE])
    # Not closed (no `additionalProperties`, optional stays optional), only the noise removed;
    # `unit` (default None) in its optional form: a null sent anyway is dropped by the executor.
    assert body["tools"][0]["function"] == {
        "name": "weather",
        "description": "Weather.",
        "parameters": {
            "properties": {
                "city": {"description": "City name", "type": "string"},
                "unit": {"type": "string"},
            },
            "required": ["city"],
            "type": "object",
        },
    }


@pytest.mark.parametrize("openai_host,flag,expected", [(False, True, True), (True, False, False)])
async def test_strict_tools_overrides_the_host_default(
    server: ReplayServer, openai_host: bool, flag: bool, expected: bool
) -> None:
    body = await _send(server, openai_host=openai_host, tools=[STRICTABLE], strict_tools=flag)
    assert body["tools"][0]["function"].get("strict", False) is expected


async def test_strict_tool_is_converted_once() -> None:
    """The strict rewrite deep-copies the schema: done once per function, not per request."""
    config = ModelConfig(provider="openai", model="gpt-4o", api_key="k", strict_tools=True)
    m = OpenAICompatModel("t", config)
    first = m._body(HELLO, [STRICTABLE], stream=False)["tools"][0]
    again = m._body(HELLO, [STRICTABLE], stream=False)["tools"][0]
    await m.aclose()
    assert first is again and first["function"]["strict"] is True


# ------------------------------------------------------------------------- thinking


@pytest.mark.parametrize(
    "model,thinking,expected",
    [
        ("deepseek-chat", True, {"thinking": {"type": "enabled"}}),
        (
            "deepseek-chat",
            {"enabled": True, "effort": "high"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        ("deepseek-v4-flash", False, {"thinking": {"type": "disabled"}}),  # explicit false
        ("deepseek-reasoner", True, {}),  # always thinks: no toggle
        ("deepseek-reasoner", {"enabled": True, "effort": "max"}, {"reasoning_effort": "max"}),
        ("o3-mini", True, {"reasoning_effort": "medium"}),
        ("gpt-5-mini", {"enabled": True, "effort": "low"}, {"reasoning_effort": "low"}),
        ("gpt-4o", True, {}),  # not a reasoning model: the field would be a 400
        ("qwen3-32b", True, {}),  # other servers' switches are not guessed
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_thinking_request_fields(
    server: ReplayServer, model: str, thinking: Any, expected: dict[str, Any], stream: bool
) -> None:
    body = await _send(server, model=model, thinking=thinking, stream=stream)
    got = {k: body[k] for k in ("thinking", "reasoning_effort") if k in body}
    assert got == expected


async def test_unset_thinking_sends_nothing_to_deepseek(server: ReplayServer) -> None:
    """DeepSeek V4 thinks by default; leaving `thinking` out of the config keeps that."""
    body = await _send(server, model="deepseek-v4-flash")
    assert "thinking" not in body and "reasoning_effort" not in body
