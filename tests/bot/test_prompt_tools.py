"""A model without native tools: the endpoint rejects `tools` with a 400, the bot downgrades to
prompt-based tool calling, and a reminder-like function still works through the full loop
(invalid arguments corrected, result fed back as text, final answer) in every prompt format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import BaseModel, Field

from chatfn.testing import TestBot
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.config import ModelConfig
from providers.factory import build_model
from tests.fakes.cassette import Received, ReplayServer, openai_chat_response

REJECT = {
    "error": {
        "message": "registry.ollama.ai/library/llama3:8b does not support tools",
        "type": "api_error",
        "param": None,
        "code": None,
    }
}


def written_call(fmt: str, args: dict) -> str:
    body = json.dumps(args)
    if fmt == "hermes":
        return f'Sure.\n<tool_call>{{"name": "remind_me", "arguments": {body}}}</tool_call>'
    if fmt == "json_block":
        return f'Sure.\n```json\n{{"tool": "remind_me", "arguments": {body}}}\n```'
    if fmt == "xml_tag":
        return f'Sure.\n<tool name="remind_me">{body}</tool>'
    return f'Sure.\n<function_call>{{"name": "remind_me", "arguments": {body}}}</function_call>'


class PromptModeServer:
    """Plays a small local model: refuses `tools`, then answers in `fmt`."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def __call__(self, rec: Received) -> web.Response:
        body = rec.body
        if "tools" in body:
            return web.json_response(REJECT, status=400)
        last = body["messages"][-1]["content"]
        if "<tool_result" not in last:
            # First attempt: a bad time (the model must fix it from the error).
            return web.json_response(
                openai_chat_response(written_call(self.fmt, {"text": "stand-up", "minutes": -5}))
            )
        if 'error="true"' in last or "Invalid arguments" in last:
            return web.json_response(
                openai_chat_response(written_call(self.fmt, {"text": "stand-up", "minutes": 10}))
            )
        return web.json_response(openai_chat_response("Reminder set for 10 minutes from now."))


@pytest.mark.parametrize("fmt", ["hermes", "json_block", "xml_tag", "function_call"])
async def test_downgrade_and_full_loop_in_each_format(tmp_path: Path, fmt: str) -> None:
    reg = Registry()
    set_reminders: list[tuple[str, int]] = []
    with reg.collecting():

        class RemindArgs(BaseModel):
            text: str
            minutes: int = Field(ge=1, description="minutes from now")

        @tool_function(name="remind_me", description="Set a reminder N minutes from now.")
        def remind_me(ctx: MessageContext, args: RemindArgs) -> FunctionResult:
            set_reminders.append((args.text, args.minutes))
            return FunctionResult(llm_content=f"reminder '{args.text}' set in {args.minutes} min")

    async with ReplayServer() as server:
        handler = PromptModeServer(fmt)
        server.queue.extend([handler] * 12)
        cfg = ModelConfig(
            provider="openai",
            model="llama3:8b",
            base_url=f"{server.url}/v1",
            prompt_format=fmt,
            max_retries=0,
        )
        model = build_model("local", cfg)
        assert model.capabilities.native_tools == "auto"
        tb = TestBot(tmp_path, model=model, registry=reg, builtins=False)
        replies = await tb.send("remind me about stand-up in 10 minutes")
        assert replies == ["Reminder set for 10 minutes from now."]
        assert set_reminders == [("stand-up", 10)]
        bodies = server.bodies()
        assert "tools" in bodies[0] and all("tools" not in b for b in bodies[1:])
        system = bodies[1]["messages"][0]["content"]
        assert "remind_me" in system and "# Tools" in system
        # The model's earlier call is replayed as text, the error and the result come back as
        # tool_result text in a user turn.
        retry = bodies[2]["messages"]
        assert retry[-2]["role"] == "assistant" and "remind_me" in retry[-2]["content"]
        assert retry[-1]["role"] == "user" and "greater than or equal to 1" in retry[-1]["content"]
        assert re.search(r'<tool_result name="remind_me"[^>]*>', retry[-1]["content"])
        final = bodies[3]["messages"][-1]["content"]
        assert "reminder 'stand-up' set in 10 min" in final
        assert getattr(model, "downgraded", False) is True

        # The model stays in prompt mode: the next message does not try `tools` again.
        server.queue[:0] = [lambda _r: web.json_response(openai_chat_response("Hi!"))]
        assert await tb.send("thanks") == ["Hi!"]
        assert "tools" not in server.bodies()[-1]
        await tb.aclose()


async def test_native_true_never_downgrades(tmp_path: Path) -> None:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="ping", description="ping")
        def ping(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["pong"])

    async with ReplayServer() as server:
        server.queue.append(lambda _r: web.json_response(REJECT, status=400))
        cfg = ModelConfig(
            provider="openai",
            model="m",
            base_url=f"{server.url}/v1",
            native_tools=True,
            max_retries=0,
        )
        model = build_model("strict", cfg)
        tb = TestBot(tmp_path, model=model, registry=reg, builtins=False)
        [reply] = await tb.send("ping please")
        assert reply.startswith("Sorry, the model refused this request")
        assert len(server.received) == 1 and not getattr(model, "downgraded", False)
        await tb.aclose()
