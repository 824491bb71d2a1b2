"""Shared helpers for provider tests: cassette filtering, model construction, and the
wire-to-ours conversion a test needs to rebuild the conversation the recorded client held."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from providers.base import ChatModel
from providers.config import ModelConfig
from providers.factory import build_model
from providers.openai_compat import OpenAICompatModel
from providers.types import (
    LLMResponse,
    Message,
    StreamEvent,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
)
from tests.fakes.cassette import Interaction, ReplayServer, load_cassette


def chat_interactions(cassette: str) -> list[Interaction]:
    """The Chat Completions exchanges of a cassette (some mix in native Gemini traffic)."""
    return [i for i in load_cassette(cassette) if i.uri.endswith("/chat/completions")]


def make_model(
    server: ReplayServer,
    model: str = "gpt-4o-mini",
    *,
    stream_usage: bool | None = True,
    **cfg: Any,
) -> OpenAICompatModel:
    cfg.setdefault("api_key", "test-key")
    cfg.setdefault("max_retries", 0)
    config = ModelConfig(provider="openai", model=model, base_url=server.url + "/v1", **cfg)
    return OpenAICompatModel("test", config, stream_usage=stream_usage)


def tools_from_wire(body: dict[str, Any]) -> list[ToolDefinition]:
    return [
        ToolDefinition(
            t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"]
        )
        for t in body.get("tools") or []
    ]


def messages_from_wire(
    wire: list[dict[str, Any]], idmap: dict[str, str] | None = None
) -> list[Message]:
    """Recorded request messages as ours (test-only inverse of to_wire_messages).
    `idmap` renames recorded call ids to the ids our adapter generated."""
    idmap = idmap or {}
    out: list[Message] = []
    for w in wire:
        role = w["role"]
        if role == "tool":
            out.append(
                Message(
                    role="tool",
                    content=w["content"],
                    tool_call_id=idmap.get(w["tool_call_id"], w["tool_call_id"]),
                )
            )
        elif role == "assistant":
            calls = [
                ToolCall(
                    idmap.get(c["id"], c["id"]), c["function"]["name"], c["function"]["arguments"]
                )
                for c in w.get("tool_calls") or []
            ]
            thinking = (
                [ThinkingBlock(text=w["reasoning_content"], provider="deepseek")]
                if w.get("reasoning_content")
                else []
            )
            out.append(
                Message(
                    role="assistant", content=w.get("content"), tool_calls=calls, thinking=thinking
                )
            )
        else:
            out.append(Message(role=role, content=w["content"]))
    return out


def normalize(wire: list[dict[str, Any]], idmap: dict[str, str] | None = None) -> list[dict]:
    """Drop what differs only in spelling: null values, the response-only `index`, ids
    renamed through `idmap` (recorded id -> ours), and the empty `content` a tool-call turn
    carries to servers other than OpenAI's own (the replay server is local)."""
    idmap = idmap or {}
    out = []
    for w in wire:
        m = {k: v for k, v in w.items() if v is not None}
        if "tool_call_id" in m:
            m["tool_call_id"] = idmap.get(m["tool_call_id"], m["tool_call_id"])
        if "tool_calls" in m:
            if m.get("content") == "":
                del m["content"]
            m["tool_calls"] = [
                {
                    "id": idmap.get(c["id"], c["id"]),
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    },
                }
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


async def run(
    model: ChatModel, messages: list[Message], tools: list[ToolDefinition] | None, stream: bool
) -> tuple[LLMResponse, list[StreamEvent]]:
    """One request; for streams also the events, checking the single-final-`done` contract."""
    if not stream:
        return await model.complete(messages, tools), []
    events = [e async for e in model.stream(messages, tools)]
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    assert events[-1].response is not None
    return events[-1].response, events


def sse(chunks: list[dict[str, Any] | str]) -> str:
    """An SSE body from chunk dicts (or raw strings such as "[DONE]")."""
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def sse_response(body: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/event-stream")


BASE = {"openai": "/v1", "anthropic": "", "gemini": ""}
MODEL = {"openai": "gpt-test", "anthropic": "claude-test", "gemini": "gemini-2.5-flash"}


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


def uncached(value: Any) -> Any:
    """A request body as it was before prompt caching: no `cache_control` marks, `system` as
    one string. The recorded Anthropic traffic predates the breakpoints; everything else in
    our requests must still match it byte for byte."""
    if isinstance(value, list):
        return [uncached(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: uncached(v) for k, v in value.items() if k != "cache_control"}
    system = out.get("system")
    if isinstance(system, list) and "messages" in out:
        out["system"] = "\n\n".join(block["text"] for block in system)
    return out
