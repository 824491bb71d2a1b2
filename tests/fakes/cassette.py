"""Replay recorded provider traffic (tests/fixtures/providers) from a real local HTTP server.

The real SDKs talk to it over TCP, so what our adapters send and receive is exactly what they
would exchange with the provider. Each request received is recorded (path, query, JSON body) so a
test can assert what the adapter carried back on the next turn (thinking, signatures, ids).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from tests.kit import bound_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROVIDER_FIXTURES = FIXTURES / "providers"


@dataclass
class Interaction:
    """One recorded exchange: what the real client sent, and what the real API answered."""

    request_body: Any
    uri: str
    status: int
    json_body: Any | None = None
    raw_body: str | None = None
    content_type: str = "application/json"
    delay: float = 0.0


def load_cassette(relative: str) -> list[Interaction]:
    """Load e.g. 'openai/test_openai_tool_output.yaml'."""
    data = yaml.safe_load((PROVIDER_FIXTURES / relative).read_text())
    out: list[Interaction] = []
    for item in data["interactions"]:
        req, resp = item["request"], item["response"]
        ctype = (resp.get("headers", {}).get("content-type") or ["application/json"])[0]
        if "parsed_body" in resp:
            out.append(
                Interaction(
                    req.get("parsed_body"),
                    req["uri"],
                    resp["status"]["code"],
                    json_body=resp["parsed_body"],
                    content_type=ctype,
                )
            )
        else:
            out.append(
                Interaction(
                    req.get("parsed_body"),
                    req["uri"],
                    resp["status"]["code"],
                    raw_body=resp["body"]["string"],
                    content_type=ctype,
                )
            )
    return out


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


Handler = Callable[[Received], Awaitable[web.StreamResponse] | web.StreamResponse]


@dataclass
class ReplayServer:
    """An aiohttp server on 127.0.0.1 answering every POST with the next queued response.

    Queue entries are Interactions (replayed as recorded) or callables (scripted: a 429, a cut-off
    stream, a hang). When the queue is empty the server answers 500 so a test that makes more
    requests than it planned fails loudly instead of hanging.
    """

    queue: list[Interaction | Handler] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    latency: float = 0.0
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> ReplayServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = bound_port(site)
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> ReplayServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def bodies(self) -> list[Any]:
        return [r.body for r in self.received]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        rec = Received(
            request.method, request.path, dict(request.query), dict(request.headers), body
        )
        self.received.append(rec)
        if self.latency:
            await asyncio.sleep(self.latency)
        if not self.queue:
            return web.json_response({"error": {"message": "replay queue empty"}}, status=500)
        item = self.queue.pop(0)
        if callable(item):
            result = item(rec)
            if asyncio.iscoroutine(result):
                result = await result
            return result  # type: ignore[return-value]
        if item.delay:
            await asyncio.sleep(item.delay)
        if item.raw_body is not None:
            return web.Response(
                status=item.status,
                text=item.raw_body,
                content_type=item.content_type.split(";")[0].strip(),
                headers={"Cache-Control": "no-cache"},
            )
        return web.json_response(item.json_body, status=item.status)


def openai_chat_response(
    content: str | None = None, tool_calls: list[dict] | None = None, model: str = "gpt-4o-mini"
) -> dict[str, Any]:
    """A Chat Completions body shaped like the recorded ones, for scripted scenarios."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": c.get("id", f"call_{i}"),
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c.get("arguments", {}))
                    if not isinstance(c.get("arguments"), str)
                    else c["arguments"],
                },
            }
            for i, c in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
