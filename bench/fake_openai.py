"""A fake OpenAI-compatible Chat Completions server for the pipeline benchmark.

It answers every `POST .../chat/completions` with one of two canned bodies:

- a request with no `tool` role message (request 1 of a message) gets a tool call,
- a request that carries a `tool` result (request 2) gets the final text.

A request with `"stream": true` gets the same answer as Server-Sent Events, in the chunks OpenAI
sends (the call's name and id first, its arguments in five fragments, then `finish_reason`; the
text in ten word-sized deltas), each chunk its own write, then the usage chunk when
`stream_options.include_usage` asks for it, then `data: [DONE]`. Every streaming contender gets
the same chunks.

Why a separate process: the benchmark measures the *client's* CPU time with
`time.process_time()`. A server in the same process would charge its own JSON parsing and HTTP
handling to whichever contender happens to be running, and would compete for the same event loop.
Run on its own it costs the client nothing but the TCP round trip, like a real provider.

Latency is set at start (`--latency-ms`) and can be changed while it runs with
`POST /_bench/latency {"ms": 200}`, so one server serves the sequential (0 ms) and the
concurrent (200 ms) phases. `GET /_bench/stats` returns request counters so the benchmark can
check that each contender really made two requests per message, with tools on each.

Standalone: `python bench/fake_openai.py --port 8000 --latency-ms 0`, then point any OpenAI
client at http://127.0.0.1:8000/v1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.cassette import openai_chat_response  # noqa: E402

TOOL_NAME = "get_weather"
TOOL_ARGUMENTS = {"city": "Paris"}
CALL_ID = "call_bench_0001"
FINAL_TEXT = "It is 18 °C and sunny in Paris today."

# Serialised once: the server's own cost should be as small and as constant as possible.
CALL_BODY = json.dumps(
    openai_chat_response(
        tool_calls=[{"id": CALL_ID, "name": TOOL_NAME, "arguments": TOOL_ARGUMENTS}]
    )
).encode()
FINAL_BODY = json.dumps(openai_chat_response(content=FINAL_TEXT)).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]


_ARGUMENTS = json.dumps(TOOL_ARGUMENTS, separators=(",", ":"))  # '{"city":"Paris"}'
_ARGUMENT_PARTS = ['{"', "city", '":"', "Paris", '"}']
assert "".join(_ARGUMENT_PARTS) == _ARGUMENTS
_TEXT_PARTS = ["It", " is", " 18", " °C", " and", " sunny", " in", " Paris", " today", "."]
assert "".join(_TEXT_PARTS) == FINAL_TEXT
CALL_CHUNKS = _sse(
    [
        _chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": CALL_ID,
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": ""},
                    }
                ],
                "refusal": None,
            }
        ),
        *(
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            for part in _ARGUMENT_PARTS
        ),
        _chunk({}, "tool_calls"),
    ]
)
FINAL_CHUNKS = _sse(
    [
        _chunk({"role": "assistant", "content": "", "refusal": None}),
        *(_chunk({"content": part}) for part in _TEXT_PARTS),
        _chunk({}, "stop"),
    ]
)
USAGE_CHUNK = _sse(
    [
        {
            **_chunk({}),
            "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    ]
)[0]
DONE = b"data: [DONE]\n\n"


class FakeOpenAI:
    """The aiohttp application: two canned answers, a latency knob and counters."""

    def __init__(self, latency_ms: float = 0.0) -> None:
        self.latency = latency_ms / 1000.0
        self.stats: dict[str, int] = {
            "requests": 0,
            "first": 0,
            "second": 0,
            "with_tools": 0,
            "streamed": 0,
            "bad": 0,
        }

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/_bench/latency", self.set_latency)
        app.router.add_get("/_bench/stats", self.get_stats)
        app.router.add_post("/_bench/reset", self.reset)
        # Any prefix (`/v1/chat/completions`, `/chat/completions`): clients differ in base_url.
        app.router.add_post("/{prefix:.*}chat/completions", self.chat)
        return app

    async def chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body: Any = json.loads(await request.read())
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            self.stats["bad"] += 1
            return web.json_response({"error": {"message": "bad request body"}}, status=400)
        self.stats["requests"] += 1
        if body.get("tools"):
            self.stats["with_tools"] += 1
        second = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
        self.stats["second" if second else "first"] += 1
        if self.latency:
            await asyncio.sleep(self.latency)
        if body.get("stream"):
            self.stats["streamed"] += 1
            return await self._stream(request, second, body)
        return web.Response(
            body=FINAL_BODY if second else CALL_BODY, content_type="application/json"
        )

    async def _stream(
        self, request: web.Request, second: bool, body: dict[str, Any]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        for data in FINAL_CHUNKS if second else CALL_CHUNKS:
            await resp.write(data)
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            await resp.write(USAGE_CHUNK)
        await resp.write(DONE)
        await resp.write_eof()
        return resp

    async def set_latency(self, request: web.Request) -> web.Response:
        data = await request.json()
        self.latency = float(data["ms"]) / 1000.0
        return web.json_response({"latency_ms": self.latency * 1000})

    async def get_stats(self, _request: web.Request) -> web.Response:
        return web.json_response(self.stats)

    async def reset(self, _request: web.Request) -> web.Response:
        for key in self.stats:
            self.stats[key] = 0
        return web.json_response(self.stats)


async def _serve(host: str, port: int, latency_ms: float) -> None:
    runner = web.AppRunner(FakeOpenAI(latency_ms).app(), access_log=None)
    await runner.setup()
    # A deep backlog: the concurrent phase opens hundreds of connections at once.
    site = web.TCPSite(runner, host, port, backlog=2048)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {bound}", flush=True)  # the parent reads this line to learn the port
    await asyncio.Event().wait()


class ServerProcess:
    """Starts the fake server as a child process and stops it; `url` is its base URL (with /v1).

    Used as a context manager by the benchmark; the child is ended by its own pid only.
    """

    def __init__(self, latency_ms: float = 0.0, host: str = "127.0.0.1") -> None:
        self.latency_ms = latency_ms
        self.host = host
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def start(self, timeout: float = 20.0) -> ServerProcess:
        self._proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--host",
                self.host,
                "--port",
                "0",
                "--latency-ms",
                str(self.latency_ms),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if line.startswith("PORT "):
                self.port = int(line.split()[1])
                return self
            if not line and self._proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError("fake OpenAI server did not start")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.host, args.port, args.latency_ms))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
