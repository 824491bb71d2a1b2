"""Script a model in any of the four wire protocols: describe each round once as a `Turn`, get
the HTTP response the real API would send, whole or streamed.

    server.queue = replies("anthropic", [Turn(thinking="...", calls=[("weather", {...})]),
                                         Turn(text="Sunny.")], stream=True)

Protocols: "openai" (Chat Completions), "deepseek" (the same, thinking as `reasoning_content`),
"anthropic" (Messages API), "gemini" (generateContent). Shapes follow the recorded traffic in
tests/fixtures/providers, so the real SDKs parse them as they parse the real APIs. Ids are
predictable: OpenAI `call_<round>_<i>`, Anthropic `toolu_<round>_<i>`; Gemini sends none (the
adapter makes them). `tool_results` reads the results a request carries back, in each shape.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from providers.config import ModelConfig

Protocol = Literal["openai", "deepseek", "anthropic", "gemini"]
PROTOCOLS: tuple[Protocol, ...] = ("openai", "deepseek", "anthropic", "gemini")


@dataclass
class Turn:
    """What the scripted model says in one round."""

    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Reasoning: DeepSeek reasoning_content, an Anthropic thinking block, a Gemini thought part.
    # OpenAI's Chat Completions never returns reasoning, so "openai" ignores it.
    thinking: str | None = None


def signature(round_: int) -> str:
    """The signature of round `round_`'s thinking (Anthropic) or first call (Gemini): base64,
    as both APIs send them, so the Gemini SDK's bytes round-trip is exercised too."""
    return base64.b64encode(f"sig-{round_}".encode()).decode()


def _split(text: str) -> list[str]:
    """Two pieces, so every stream really assembles fragments."""
    cut = max(1, len(text) // 2)
    return [text[:cut], text[cut:]] if len(text) > 1 else [text]


def _sse(events: list[Any], *, named: bool = False) -> web.Response:
    lines = []
    for event in events:
        if isinstance(event, str):
            lines.append(f"data: {event}\n\n")
        else:
            head = f"event: {event['type']}\n" if named else ""
            lines.append(f"{head}data: {json.dumps(event)}\n\n")
    return web.Response(text="".join(lines), content_type="text/event-stream")


# ------------------------------------------------------------------------ OpenAI / DeepSeek


def openai_events(turn: Turn, round_: int, *, deepseek: bool, usage: bool = True) -> list[Any]:
    """Chat Completions stream chunks (with the final `[DONE]`)."""
    model = "deepseek-chat" if deepseek else "gpt-4o"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{round_}",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out: list[Any] = [chunk({"role": "assistant", "content": ""})]
    if deepseek and turn.thinking:
        out += [chunk({"reasoning_content": p}) for p in _split(turn.thinking)]
    if turn.text:
        out += [chunk({"content": p}) for p in _split(turn.text)]
    for i, (name, args) in enumerate(turn.calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{round_}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in _split(json.dumps(args))
        ]
    out.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    if usage:  # the real APIs send the usage chunk only when stream_options asks for it
        out.append({**chunk({}), "choices": [], "usage": openai_usage(deepseek=deepseek)})
    out.append("[DONE]")
    return out


def openai_usage(*, deepseek: bool) -> dict[str, Any]:
    """Usage as each reports it: 20 prompt tokens of which 8 came from the cache (OpenAI
    `prompt_tokens_details.cached_tokens`, DeepSeek `prompt_cache_hit_tokens`), 10 completion
    tokens of which 4 were reasoning."""
    usage: dict[str, Any] = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    details = {"completion_tokens_details": {"reasoning_tokens": 4}}
    if deepseek:
        return {**usage, "prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 12, **details}
    return {**usage, "prompt_tokens_details": {"cached_tokens": 8}, **details}


def openai_body(turn: Turn, round_: int, *, deepseek: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if deepseek and turn.thinking:
        message["reasoning_content"] = turn.thinking
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{round_}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(turn.calls)
        ]
    return {
        "id": f"chatcmpl-{round_}",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-chat" if deepseek else "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": openai_usage(deepseek=deepseek),
    }


# ------------------------------------------------------------------------ Anthropic


ANTHROPIC_USAGE = {
    "input_tokens": 10,
    "cache_read_input_tokens": 8,
    "cache_creation_input_tokens": 2,
    "output_tokens": 10,
}


def _anthropic_blocks(turn: Turn, round_: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.thinking:
        blocks.append(
            {"type": "thinking", "thinking": turn.thinking, "signature": signature(round_)}
        )
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [
        {"type": "tool_use", "id": f"toolu_{round_}_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(turn.calls)
    ]
    return blocks


def anthropic_body(turn: Turn, round_: int) -> dict[str, Any]:
    return {
        "id": f"msg_{round_}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": _anthropic_blocks(turn, round_),
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        # input_tokens is the uncached part only: 10 + 8 read from the cache + 2 written = 20.
        "usage": ANTHROPIC_USAGE,
    }


def anthropic_events(turn: Turn, round_: int) -> list[dict[str, Any]]:
    """Messages API stream events: each block opened, filled by deltas, closed."""
    start = {
        **anthropic_body(turn, round_),
        "content": [],
        "stop_reason": None,
        "usage": {**ANTHROPIC_USAGE, "output_tokens": 1},
    }
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(_anthropic_blocks(turn, round_)):
        kind = block["type"]
        if kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _split(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _split(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _split(json.dumps(block["input"]))
            ]
        out.append({"type": "content_block_start", "index": index, "content_block": opened})
        out += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": index})
    out += [
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if turn.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": 10},
        },
        {"type": "message_stop"},
    ]
    return out


# ------------------------------------------------------------------------ Gemini


def gemini_parts(turn: Turn, round_: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.thinking:
        parts.append({"text": turn.thinking, "thought": True})
    if turn.text:
        parts.append({"text": turn.text})
    for i, (name, args) in enumerate(turn.calls):
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
        if i == 0:  # Gemini signs the first call of a parallel set only
            part["thoughtSignature"] = signature(round_)
        parts.append(part)
    return parts


def gemini_chunk(parts: list[dict[str, Any]], *, finish: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "modelVersion": "gemini-test",
        # Thoughts are counted apart from candidates: 6 + 4 = 10 completion tokens.
        "usageMetadata": {
            "promptTokenCount": 20,
            "cachedContentTokenCount": 8,
            "candidatesTokenCount": 6,
            "thoughtsTokenCount": 4,
        },
    }


def gemini_events(turn: Turn, round_: int) -> list[dict[str, Any]]:
    """streamGenerateContent chunks: text split across chunks, each call whole (as Gemini does)."""
    chunks: list[dict[str, Any]] = []
    for part in gemini_parts(turn, round_):
        if "text" in part:
            chunks += [
                gemini_chunk([{**part, "text": p}], finish=False) for p in _split(part["text"])
            ]
        else:
            chunks.append(gemini_chunk([part], finish=False))
    chunks.append(gemini_chunk([{"text": ""}], finish=True))
    return chunks


# ------------------------------------------------------------------------ one entry point


def reply(
    protocol: Protocol, turn: Turn, round_: int, *, stream: bool, request: Any = None
) -> web.Response:
    """The HTTP response of round `round_` (1-based) in `protocol`. `request` (the received
    body): an OpenAI-protocol stream carries usage only when it asked for it."""
    if protocol in ("openai", "deepseek"):
        deepseek = protocol == "deepseek"
        if stream:
            asked = isinstance(request, dict) and (request.get("stream_options") or {}).get(
                "include_usage"
            )
            return _sse(openai_events(turn, round_, deepseek=deepseek, usage=bool(asked)))
        return web.json_response(openai_body(turn, round_, deepseek=deepseek))
    if protocol == "anthropic":
        if stream:
            return _sse(anthropic_events(turn, round_), named=True)
        return web.json_response(anthropic_body(turn, round_))
    if stream:
        return _sse(gemini_events(turn, round_))
    return web.json_response(gemini_chunk(gemini_parts(turn, round_), finish=True))


def replies(
    protocol: Protocol, turns: list[Turn], *, stream: bool
) -> list[Callable[[Any], web.Response]]:
    """ReplayServer queue entries answering the turns in order."""
    return [
        lambda received, t=turn, r=k: reply(
            protocol, t, r, stream=stream, request=getattr(received, "body", None)
        )
        for k, turn in enumerate(turns, 1)
    ]


@dataclass
class ToolResult:
    """One function result as a request carried it back, whatever the protocol."""

    call_id: str
    name: str | None
    content: str
    is_error: bool | None  # None: the protocol has no error flag (OpenAI)


def tool_results(protocol: Protocol, body: dict[str, Any]) -> list[ToolResult]:
    """The results in the last turn of a request body, read in that protocol's own shape:
    OpenAI `tool` messages, Anthropic `tool_result` blocks, Gemini `functionResponse` parts."""
    if protocol in ("openai", "deepseek"):
        out = []
        for m in reversed(body["messages"]):
            if m["role"] != "tool":
                break
            out.append(ToolResult(m["tool_call_id"], None, m["content"], None))
        return out[::-1]
    if protocol == "anthropic":
        last = body["messages"][-1]
        return [
            ToolResult(b["tool_use_id"], None, b["content"], b.get("is_error"))
            for b in last["content"]
            if b["type"] == "tool_result"
        ]
    out = []
    for part in body["contents"][-1]["parts"]:
        response = part["functionResponse"]
        [(key, value)] = response["response"].items()
        out.append(ToolResult(response.get("id", ""), response["name"], value, key == "error"))
    return out


def model_config(
    protocol: Protocol, url: str, *, stream: bool = False, thinking: bool | dict[str, Any] = True
) -> ModelConfig:
    """A `models:` entry for a model of `protocol` served at `url` (a local scripted server).

    Thinking is on by default where the protocol has it, so its replay is exercised; OpenAI
    gets none (its Chat Completions returns no reasoning). Native tools are forced on: the
    default for a non-OpenAI URL is "auto", whose downgrade path is tested elsewhere.
    """
    common: dict[str, Any] = {
        "api_key": "test-key",
        "streaming": stream,
        "max_retries": 0,
        "timeout": 10,
    }
    if thinking and not isinstance(thinking, dict):
        thinking = {"enabled": True, "budget_tokens": 1024}
    if protocol == "openai":
        return ModelConfig(
            provider="openai", model="gpt-4o", base_url=f"{url}/v1", native_tools=True, **common
        )
    if protocol == "deepseek":
        return ModelConfig(
            provider="openai",
            model="deepseek-chat",
            base_url=f"{url}/v1",
            native_tools=True,
            thinking=thinking,
            **common,
        )
    name = "claude-test" if protocol == "anthropic" else "gemini-test"
    return ModelConfig(provider=protocol, model=name, base_url=url, thinking=thinking, **common)
