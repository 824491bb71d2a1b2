"""One conversation, both native protocols, streamed and not: a tool call with bad arguments, the
validation error going back as an error result, the corrected call, and the final answer.

Driven at the adapter level (messages in, responses out) against a scripted server that checks
each request like the real API would before answering.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web
from pydantic import BaseModel, Field, ValidationError

from providers.anthropic import AnthropicModel
from providers.base import ChatModel, collect
from providers.config import ModelConfig
from providers.gemini import GeminiModel
from providers.schema import compact_schema
from providers.types import LLMResponse, Message, ToolDefinition
from tests.fakes.cassette import Received
from tests.fakes.raw_replay import RawReplayServer, sse


class ReminderArgs(BaseModel):
    """Set a reminder."""

    when: datetime = Field(description="ISO 8601 date and time")
    text: str = Field(min_length=1)
    repeat: str | None = None


TOOL = ToolDefinition("reminder_set", "Set a reminder.", ReminderArgs.model_json_schema())
BAD = {"when": "tomorrow morning", "text": "stand up"}
GOOD = {"when": "2030-01-01T09:00:00", "text": "stand up"}
FINAL = "Done: I will remind you to stand up on 1 January 2030 at 09:00."


# ------------------------------------------------------------------- the scripted model, per API


def _signature(round_: int) -> str:
    return base64.b64encode(f"sig-{round_}".encode()).decode()


class Script:
    """What the model 'says' each round, checked against what the adapter sent."""

    def __init__(self, protocol: str, stream: bool) -> None:
        self.protocol = protocol
        self.stream = stream
        self.round = 0

    def __call__(self, received: Received) -> web.Response:
        self.round += 1
        body = received.body
        if self.protocol == "anthropic":
            check, reply = self._anthropic_round(body)
        else:
            check, reply = self._gemini_round(body)
        check()
        return reply

    # -- Anthropic Messages API
    def _anthropic_round(self, body: dict[str, Any]) -> tuple[Callable[[], None], web.Response]:
        def check() -> None:
            # Compacted (no titles; `repeat: str | None = None` in its optional form: not
            # required, no null; the executor treats a null sent anyway as absent).
            schema = body["tools"][0]["input_schema"]
            assert schema == compact_schema(ReminderArgs.model_json_schema())
            assert schema["properties"]["repeat"] == {"type": "string"}
            assert "repeat" not in schema["required"]
            assert body["system"] == [
                {
                    "type": "text",
                    "text": "You are a helpful bot.",
                    "cache_control": {"type": "ephemeral"},
                }
            ]
            if self.round == 1:
                assert len(body["messages"]) == 1
            else:
                results = body["messages"][-1]["content"]
                assert body["messages"][-1]["role"] == "user" and len(results) == 1
                call_id = body["messages"][-2]["content"][-1]["id"]
                assert results[0]["tool_use_id"] == call_id == f"toolu_{self.round - 1}"
                assert results[0]["is_error"] is (self.round == 2)
                if self.round == 2:
                    assert "when" in results[0]["content"]

        if self.round < 3:
            blocks = [("text", "Let me set that."), ("call", BAD if self.round == 1 else GOOD)]
        else:
            blocks = [("text", FINAL)]
        return check, self._anthropic_reply(blocks)

    def _anthropic_reply(self, blocks: list[tuple[str, Any]]) -> web.Response:
        has_call = any(kind == "call" for kind, _ in blocks)
        stop = "tool_use" if has_call else "end_turn"
        usage = {"input_tokens": 20, "output_tokens": 10}
        if not self.stream:
            content = [
                {"type": "text", "text": v}
                if k == "text"
                else {
                    "type": "tool_use",
                    "id": f"toolu_{self.round}",
                    "name": "reminder_set",
                    "input": v,
                }
                for k, v in blocks
            ]
            return web.json_response(
                {
                    "id": f"msg_{self.round}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{self.round}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 20, "output_tokens": 1},
                },
            }
        ]
        for index, (kind, value) in enumerate(blocks):
            if kind == "text":
                events.append(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for piece in (value[:5], value[5:]):
                    events.append(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
            else:
                events.append(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_{self.round}",
                            "name": "reminder_set",
                            "input": {},
                        },
                    }
                )
                args = json.dumps(value)
                for piece in (args[:7], args[7:]):
                    events.append(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        }
                    )
            events.append({"type": "content_block_stop", "index": index})
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        return web.Response(text=sse(events), content_type="text/event-stream")

    # -- Gemini generateContent
    def _gemini_round(self, body: dict[str, Any]) -> tuple[Callable[[], None], web.Response]:
        def check() -> None:
            declaration = body["tools"][0]["functionDeclarations"][0]
            assert declaration["parameters"]["properties"]["when"]["format"] == "date-time"
            assert declaration["parameters"]["properties"]["repeat"] == {"type": "STRING"}
            assert body["systemInstruction"]["parts"][0]["text"] == "You are a helpful bot."
            contents = body["contents"]
            if self.round == 1:
                assert len(contents) == 1
            else:
                call = contents[-2]["parts"][-1]["functionCall"]
                [part] = contents[-1]["parts"]
                response = part["functionResponse"]
                assert response["id"] == call["id"] and response["id"].startswith("call_")
                assert response["name"] == "reminder_set"
                assert list(response["response"]) == (["error"] if self.round == 2 else ["result"])
                # The signature came back on the call part it was sent with.
                assert contents[-2]["parts"][-1]["thoughtSignature"] == _signature(self.round - 1)

        if self.round < 3:
            parts = [
                {"text": "Let me set that."},
                {
                    "functionCall": {
                        "name": "reminder_set",
                        "args": BAD if self.round == 1 else GOOD,
                    },
                    "thoughtSignature": _signature(self.round),
                },
            ]
        else:
            parts = [{"text": FINAL}]
        return check, self._gemini_reply(parts)

    def _gemini_reply(self, parts: list[dict[str, Any]]) -> web.Response:
        usage = {"promptTokenCount": 20, "candidatesTokenCount": 10}

        def chunk(chunk_parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {
                "content": {"parts": chunk_parts, "role": "model"},
                "index": 0,
            }
            if finish:
                candidate["finishReason"] = "STOP"
            return {
                "candidates": [candidate],
                "usageMetadata": usage,
                "modelVersion": "gemini-test",
            }

        if not self.stream:
            return web.json_response(chunk(parts, True))
        chunks = [chunk([p], False) for p in parts] + [chunk([{"text": ""}], True)]
        return web.Response(text=sse(chunks, named=False), content_type="text/event-stream")


# ------------------------------------------------------------------- the driver


@pytest.fixture
async def server() -> AsyncIterator[RawReplayServer]:
    async with RawReplayServer() as srv:
        yield srv


def _model(protocol: str, url: str) -> ChatModel:
    if protocol == "anthropic":
        return AnthropicModel(
            "claude",
            ModelConfig(provider="anthropic", model="claude-test", api_key="k", base_url=url),
        )
    return GeminiModel(
        "gemini", ModelConfig(provider="gemini", model="gemini-test", api_key="k", base_url=url)
    )


def execute(call_arguments: str) -> tuple[str, bool]:
    """What the executor does: validate into the argument model; an error goes back to the
    model as a short, actionable message flagged as an error."""
    try:
        args = ReminderArgs.model_validate_json(call_arguments)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return f"Invalid arguments: {problems}. Fix them and call again.", True
    return f"reminder set for {args.when.isoformat()}", False


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("protocol", ["anthropic", "gemini"])
async def test_validation_error_corrected_then_answer(
    server: RawReplayServer, protocol: str, stream: bool
) -> None:
    script = Script(protocol, stream)
    server.queue = [script, script, script]
    model = _model(protocol, server.url)
    messages = [
        Message(role="system", content="You are a helpful bot."),
        Message(role="user", content="remind me to stand up tomorrow at 9"),
    ]
    responses: list[LLMResponse] = []
    try:
        for _ in range(5):
            if stream:
                response = await collect(model.stream(messages, [TOOL]))
            else:
                response = await model.complete(messages, [TOOL])
            responses.append(response)
            messages.append(response.as_message())
            if not response.tool_calls:
                break
            for call in response.tool_calls:
                content, is_error = execute(call.arguments)
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        name=call.name,
                        content=content,
                        is_error=is_error,
                    )
                )
    finally:
        await model.aclose()

    assert script.round == 3 and len(server.received) == 3
    first, second, final = responses
    assert json.loads(first.tool_calls[0].arguments) == BAD
    assert json.loads(second.tool_calls[0].arguments) == GOOD
    assert first.content == second.content == "Let me set that."
    assert first.finish_reason == second.finish_reason == "tool_calls"
    assert final.content == FINAL and final.finish_reason == "stop" and not final.tool_calls
    assert [m.is_error for m in messages if m.role == "tool"] == [True, False]
    assert final.usage is not None and final.usage.input_tokens == 20
