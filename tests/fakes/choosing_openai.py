"""A local OpenAI-compatible server whose models choose tools: `POST /v1/chat/completions`
(non-streamed, as OpenAI answers it), where each model name has a tool it calls first when
it is offered, and then answers with the tool results it was given. Two such models choose
differently on the same turn: what `chatfn replay`'s report must show."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tests.kit import serve


class ChoosingOpenAI:
    def __init__(
        self, choices: dict[str, tuple[str, dict[str, Any]] | None], insist: tuple[str, ...] = ()
    ) -> None:
        """`choices`: model name -> (tool, arguments) it calls first (None: it only talks);
        the models in `insist` call theirs even when it is not offered (a model making a call
        up, which the bot must refuse)."""
        self.choices = choices
        self.insist = insist
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> ChoosingOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.completions)
        self.runner, port = await serve(app)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        model = body.get("model", "")
        if model not in self.choices:
            error = {"message": f"The model `{model}` does not exist", "code": "model_not_found"}
            return web.json_response({"error": error}, status=404)
        messages = body["messages"]
        results = [m["content"] for m in messages[-3:] if m.get("role") == "tool"]
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        choice = self.choices[model]
        message: dict[str, Any]
        hidden = choice is not None and choice[0] not in offered and model not in self.insist
        if results or choice is None or hidden:
            last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            said = " | ".join(results) if results else f"heard: {last.splitlines()[-1]}"
            message = {"role": "assistant", "content": f"{model} says {said}"}
            finish = "stop"
        else:
            tool, arguments = choice
            call = {
                "id": f"call_{len(self.requests)}",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            }
        )
