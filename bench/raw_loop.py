"""The raw `openai` SDK tool loop the benchmarks compare chatfn with, importing nothing but
`openai` and the standard library.

Why a module of its own: bench/bench_pipeline.py's peak-RSS mode (`--rss`) runs this loop in a
process of its own, and that process must not import chatfn (or pydantic models of its own) or
its peak RSS would no longer be the raw loop's. The tool definition and the system prompt are
given by the caller (bench_pipeline derives them from chatfn's registry and prompt), so both
sides send comparable requests.

One "message": request 1 with the tool is answered with a call to `get_weather`; the function
runs; request 2 with the result is answered with the final text. With `stream=True` both requests
stream (`stream=True`, `stream_options.include_usage`, as chatfn's adapter asks) and the loop
assembles the call and the text from the chunks, handing each text delta to an observer, as a
minimal hand-written streaming loop would.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncOpenAI

MODEL = "gpt-4o-mini"
QUESTION = "What's the weather in Paris right now?"

TextObserver = Callable[[str], Awaitable[None]]


def weather_for(city: str) -> str:
    """The 'work' of the function: trivial on purpose, so only the plumbing is measured."""
    return json.dumps({"city": city, "temp_c": 18, "sky": "sunny"})


async def _ignore_text(_text: str) -> None:
    """The client the streamed text goes to: showing it is not what is measured."""


class RawContender:
    """The minimal hand-written tool loop on one shared AsyncOpenAI client."""

    name = "raw"

    def __init__(
        self,
        base_url: str,
        tools: list[dict[str, Any]],
        system: str,
        *,
        aiohttp: bool = False,
        stream: bool = False,
        on_text: TextObserver = _ignore_text,
    ) -> None:
        # Same retry and timeout settings as chatfn's ModelConfig defaults; SDK default pool.
        # aiohttp: the SDK's own aiohttp transport (`DefaultAioHttpClient`), the one chatfn
        # uses by default, so the two loops differ only by what the bot does.
        extra: dict[str, Any] = {}
        if aiohttp:
            from openai import DefaultAioHttpClient

            extra["http_client"] = DefaultAioHttpClient(timeout=60.0)
        self.client = AsyncOpenAI(
            api_key="bench", base_url=base_url, max_retries=2, timeout=60.0, **extra
        )
        self.tools = tools
        self.system = system
        self.stream = stream
        self.on_text = on_text

    async def message(self, i: int) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": QUESTION},
        ]
        text, calls = await self._ask(messages)
        if not calls:
            return text
        messages.append({"role": "assistant", "tool_calls": calls})
        for call in calls:
            args = json.loads(call["function"]["arguments"] or "{}")
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": weather_for(**args)}
            )
        text, _ = await self._ask(messages)
        return text

    async def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """(text, tool calls in the request's wire shape) of one Chat Completions request."""
        if self.stream:
            return await self._ask_streamed(messages)
        reply = (
            (
                await self.client.chat.completions.create(
                    model=MODEL,
                    messages=messages,  # type: ignore[arg-type]
                    tools=self.tools,  # type: ignore[arg-type]
                )
            )
            .choices[0]
            .message
        )
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in reply.tool_calls or []
            if c.type == "function"
        ]
        return reply.content or "", calls

    async def _ask_streamed(
        self, messages: list[dict[str, Any]]
    ) -> tuple[str, list[dict[str, Any]]]:
        stream = await self.client.chat.completions.create(  # type: ignore[call-overload]
            model=MODEL,
            messages=messages,
            tools=self.tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            if not chunk.choices:  # the usage chunk
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                await self.on_text(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.id:
                    call["id"] = part.id
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
        return "".join(text), [calls[k] for k in sorted(calls)]

    async def aclose(self) -> None:
        await self.client.close()


class RawPostContender(RawContender):
    """The same hand-written loop through `client.post(..., cast_to=object)`: plain dicts in and
    out, the HTTP path chatfn's OpenAI adapter uses (streamed: `stream_cls=AsyncStream[object]`,
    as the adapter does). Not one of the contenders the targets compare; it separates chatfn's
    own pipeline cost (chatfn - raw_post) from the cost of the SDK's typed `create()` (raw -
    raw_post), which chatfn's adapter does not pay."""

    name = "raw_post"

    async def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": self.tools}
        if self.stream:
            return await self._post_streamed(body)
        reply = (await self.client.post("/chat/completions", body=body, cast_to=object))[  # type: ignore[index]
            "choices"
        ][0]["message"]
        return reply.get("content") or "", reply.get("tool_calls") or []

    async def _post_streamed(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        from openai import AsyncStream

        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        stream: Any = await self.client.post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            if not chunk.get("choices"):
                continue
            delta = chunk["choices"][0].get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
                await self.on_text(delta["content"])
            for part in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    part["index"],
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.get("id"):
                    call["id"] = part["id"]
                fn = part.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
        return "".join(text), [calls[k] for k in sorted(calls)]
