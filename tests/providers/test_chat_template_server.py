"""An OpenAI-compatible server that renders a chat template, as llama.cpp's server does (issue
11 §4b): its template reads `content` on every turn, so a tool-call turn sent without one made
every native tool round fail after the function had run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from pydantic import BaseModel

from chatfn.testing import TestBot
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.factory import build_model
from providers.openai_compat import to_wire_messages
from providers.types import Message, ToolCall
from tests.fakes.cassette import openai_chat_response
from tests.fakes.protocols import model_config
from tests.kit import serve

# ChatML as llama.cpp ships it: `+` on a missing key raises jinja2.UndefinedError.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}<|im_start|>assistant\\n"
)


class TemplateServer:
    def __init__(self) -> None:
        self.template = jinja2.Environment().from_string(CHATML)
        self.prompts: list[str] = []
        self.replies: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            self.prompts.append(self.template.render(messages=body["messages"]))
        except jinja2.UndefinedError as exc:  # what llama-cpp-python answers
            return web.json_response({"error": {"message": str(exc)}}, status=500)
        return web.json_response(self.replies.pop(0))


class CityArgs(BaseModel):
    city: str


async def test_a_native_tool_round_works_against_a_template_rendering_server(
    tmp_path: Path,
) -> None:
    fake = TemplateServer()
    fake.replies = [
        openai_chat_response(tool_calls=[{"name": "weather", "arguments": {"city": "Oslo"}}]),
        openai_chat_response(content="Sunny in Oslo."),
    ]
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner, port = await serve(app)
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Current weather in a city.")
        async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            return FunctionResult(llm_content=f"{args.city}: sunny")

    cfg = model_config("openai", f"http://127.0.0.1:{port}")
    tb = TestBot(tmp_path, model=build_model("local", cfg), registry=registry, builtins=False)
    try:
        assert await tb.send("weather in Oslo?") == ["Sunny in Oslo."]
    finally:
        await tb.aclose()
        await runner.cleanup()
    assert len(fake.prompts) == 2 and "Oslo: sunny" in fake.prompts[1]


def test_openai_itself_keeps_the_recorded_form() -> None:
    turn = Message(role="assistant", content=None, tool_calls=[ToolCall("c1", "f", "{}")])
    assert "content" not in to_wire_messages([turn])[0]
    assert to_wire_messages([turn], empty_content=True)[0]["content"] == ""
    assert json.dumps(to_wire_messages([turn], empty_content=True))
