"""A local OpenAI-compatible server for the console's model tests: `POST /v1/chat/completions`
as OpenAI documents it, refusing what OpenAI refuses: a missing or wrong key (401
`invalid_api_key`), an unknown model (404 `model_not_found`), a body without messages (400).
It answers `pong: <the last user message>`, streamed (SSE chunks, `[DONE]`) when asked."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tests.kit import serve


def _error(status: int, message: str, kind: str, code: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status)


class FakeOpenAI:
    def __init__(self, key: str = "sk-good", models: tuple[str, ...] = ("fake-1",)) -> None:
        self.key = key
        self.models = set(models)
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> FakeOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.completions)
        self.runner, port = await serve(app)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def completions(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {self.key}":
            return _error(
                401,
                "Incorrect API key provided. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            )
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body", "invalid_request_error", "")
        self.requests.append(body)
        model = body.get("model")
        if model not in self.models:
            return _error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "[] is too short - 'messages'", "invalid_request_error", "")
        users = [m for m in messages if m.get("role") == "user"]
        last = users[-1]["content"] if users else ""
        if isinstance(last, list):
            last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
        text = f"pong: {last}"
        made = int(time.time())
        if body.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i, delta in enumerate(
                [{"role": "assistant", "content": ""}, {"content": text}, {}]
            ):
                chunk = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": made,
                    "model": model,
                    "choices": [
                        {"index": 0, "delta": delta, "finish_reason": "stop" if i == 2 else None}
                    ],
                }
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            return resp
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": made,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
            }
        )
