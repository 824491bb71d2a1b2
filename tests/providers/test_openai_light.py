"""The light Chat Completions POST (providers/openai_light.py) against the SDK's own
`client.post(..., cast_to=object)`: each case is sent both ways to the same local server, and
what the server saw (headers, body bytes, attempts) and what came back or was raised must be
the same. A change in a future SDK that the light poster does not follow fails here."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from providers.config import ModelConfig
from providers.openai_compat import OpenAICompatModel
from providers.openai_light import LightPost
from providers.sdk_http import aiohttp_client
from providers.types import Message

BODY: dict[str, Any] = {
    "model": "m",
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "messages": [{"role": "user", "content": "Grüße, 你好 \u2028"}],
}
ANSWER = {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "model": "m"}

Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    headers: dict[str, str]
    body: bytes
    path_qs: str


@dataclass
class Server:
    """Answers each request with the next of `replies` (the last one repeats) and keeps what
    it was sent."""

    replies: list[Reply] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(dict(request.headers), await request.read(), request.path_qs))
        reply = self.replies[min(len(self.seen), len(self.replies)) - 1]
        return await reply(request)


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Server]:
    server = Server()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    async with TestServer(app, host="127.0.0.1", port=0) as ts:
        server.url = str(ts.make_url("/v1"))
        yield server


def json_reply(data: Any, status: int = 200, **headers: str) -> Reply:
    async def reply(_request: web.Request) -> web.StreamResponse:
        return web.json_response(data, status=status, headers=headers)

    return reply


def text_reply(text: str, status: int = 200) -> Reply:
    async def reply(_request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, status=status, content_type="text/html")

    return reply


def sleeping(seconds: float) -> Reply:
    async def reply(_request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return web.json_response(ANSWER)

    return reply


def sdk_client(url: str, *, retries: int, timeout: float = 10.0) -> tuple[openai.AsyncOpenAI, Any]:
    """A client made as the adapter makes it: its own aiohttp HTTP client passed in."""
    http = aiohttp_client("openai", timeout)
    assert http is not None
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url=url, timeout=timeout, max_retries=retries, http_client=http
    )
    return client, http


async def both_ways(
    replies: list[Reply], *, retries: int = 0, timeout: float = 10.0, stream: bool = False
) -> list[tuple[Any, list[Seen]]]:
    """[(result or exception, what the server saw)] for the SDK's post and the light one. The
    SDK's platform headers are looked up by a first request, as the adapter's first request
    does, before either way is measured."""
    out: list[tuple[Any, list[Seen]]] = []
    for light in (False, True):
        async with serving() as server:
            client, http = sdk_client(server.url, retries=retries, timeout=timeout)
            try:
                server.replies = [json_reply(ANSWER)]
                await client.post("/chat/completions", body=BODY, cast_to=object)
                poster = LightPost.for_client(client, http)
                assert poster is not None
                server.seen.clear()
                server.replies = replies
                try:
                    if stream:
                        result: Any = await streamed(client, poster if light else None)
                    elif light:
                        result = await poster(BODY)
                    else:
                        result = await client.post("/chat/completions", body=BODY, cast_to=object)
                except openai.OpenAIError as exc:
                    result = exc
                out.append((result, list(server.seen)))
            finally:
                await client.close()
    return out


async def streamed(client: openai.AsyncOpenAI, poster: LightPost | None) -> list[Any]:
    """The chunks of a streamed answer, read to the end through the SDK's stream."""
    cls = openai.AsyncStream[object]
    if poster is not None:
        stream = await poster.stream(BODY, cls)
    else:
        stream = await client.post(
            "/chat/completions", body=BODY, cast_to=object, stream=True, stream_cls=cls
        )
    assert isinstance(stream, openai.AsyncStream)
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.close()


def sse_reply(*events: str) -> Reply:
    async def reply(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(f"data: {event}\n\n".encode())
        await response.write_eof()
        return response

    return reply


CHUNKS = ['{"choices":[{"delta":{"content":"o"}}]}', '{"choices":[{"delta":{"content":"k"}}]}']


def same_error(a: Any, b: Any) -> None:
    assert type(a) is type(b) and isinstance(a, openai.OpenAIError)
    assert str(a) == str(b)
    if isinstance(a, openai.APIStatusError):
        assert (a.status_code, a.body) == (b.status_code, b.body)


def comparable(headers: dict[str, str], *, retry: bool = False) -> dict[str, str]:
    """Headers as compared: without `Host` (each way has a server of its own) and, in a retry,
    without the retry count (it restarts in the SDK's retries after a light first attempt)."""
    left_out = {"host", "x-stainless-retry-count"} if retry else {"host"}
    return {k.lower(): v for k, v in headers.items() if k.lower() not in left_out}


async def test_an_answer_is_the_same_request_and_the_same_result() -> None:
    (sdk, sdk_seen), (light, light_seen) = await both_ways([json_reply(ANSWER)])
    assert sdk == light == ANSWER
    assert len(sdk_seen) == len(light_seen) == 1
    light_headers = comparable(light_seen[0].headers)
    assert light_headers == comparable(sdk_seen[0].headers)  # every header, the same value
    assert {"authorization", "x-stainless-read-timeout", "x-stainless-retry-count"} <= set(
        light_headers
    )
    assert light_seen[0].body == sdk_seen[0].body  # the same bytes: prompt caching sees one prefix
    assert light_seen[0].path_qs == sdk_seen[0].path_qs == "/v1/chat/completions"
    assert light_seen[0].headers["Authorization"] == "Bearer sk-test"


async def test_a_body_that_is_not_json_comes_back_as_text() -> None:
    (sdk, _), (light, _) = await both_ways([text_reply("<html>proxy</html>")])
    assert sdk == light == "<html>proxy</html>"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_a_refusal_is_the_sdks_error_and_is_sent_once(status: int) -> None:
    error = {"error": {"message": f"refused {status}", "type": "invalid_request_error"}}
    (sdk, sdk_seen), (light, light_seen) = await both_ways([json_reply(error, status)], retries=2)
    same_error(sdk, light)
    assert len(sdk_seen) == len(light_seen) == 1


async def test_a_rate_limit_is_retried_after_the_wait_it_names() -> None:
    replies = [json_reply({"error": {"message": "slow"}}, 429, **{"retry-after-ms": "300"})]
    replies.append(json_reply(ANSWER))
    started = time.monotonic()
    (sdk, sdk_seen), (light, light_seen) = await both_ways(replies, retries=2)
    assert sdk == light == ANSWER
    assert len(sdk_seen) == len(light_seen) == 2
    assert time.monotonic() - started >= 0.6  # each way waited the 300 ms it was told
    assert comparable(light_seen[1].headers, retry=True) == comparable(
        sdk_seen[1].headers, retry=True
    )
    assert light_seen[1].body == sdk_seen[1].body


async def test_a_server_error_is_tried_as_often_as_the_sdk_tries_it() -> None:
    fail = json_reply({"error": {"message": "down"}}, 503, **{"retry-after-ms": "10"})
    (sdk, sdk_seen), (light, light_seen) = await both_ways([fail], retries=2)
    same_error(sdk, light)
    assert isinstance(light, openai.InternalServerError)
    assert len(sdk_seen) == len(light_seen) == 3


async def test_the_server_saying_do_not_retry_is_obeyed() -> None:
    fail = json_reply({"error": {"message": "no"}}, 500, **{"x-should-retry": "false"})
    (sdk, sdk_seen), (light, light_seen) = await both_ways([fail], retries=2)
    same_error(sdk, light)
    assert len(sdk_seen) == len(light_seen) == 1


async def test_no_retries_left_means_the_first_error_is_raised() -> None:
    fail = json_reply({"error": {"message": "busy"}}, 429)
    (sdk, sdk_seen), (light, light_seen) = await both_ways([fail], retries=0)
    same_error(sdk, light)
    assert len(sdk_seen) == len(light_seen) == 1


async def test_a_timeout_is_the_sdks_timeout_and_retried_as_often() -> None:
    (sdk, sdk_seen), (light, light_seen) = await both_ways(
        [sleeping(1.0), json_reply(ANSWER)], retries=1, timeout=0.3
    )
    assert sdk == light == ANSWER
    assert len(sdk_seen) == len(light_seen) == 2
    (sdk, _), (light, _) = await both_ways([sleeping(1.0)], retries=0, timeout=0.3)
    same_error(sdk, light)
    assert isinstance(light, openai.APITimeoutError)


async def test_a_server_that_is_gone_is_a_connection_error() -> None:
    async with serving() as server:
        url = server.url
    for retries in (0, 1):
        client, http = sdk_client(url, retries=retries)
        try:
            poster = LightPost(client, http, *_fixed(client))
            with pytest.raises(openai.APIConnectionError) as light:
                await poster(BODY)
            with pytest.raises(openai.APIConnectionError) as sdk:
                await client.post("/chat/completions", body=BODY, cast_to=object)
            assert type(light.value) is type(sdk.value)
        finally:
            await client.close()


def _fixed(client: openai.AsyncOpenAI) -> tuple[Any, dict[str, str]]:
    from providers.openai_light import PATH, _fixed_headers

    base = client.base_url
    return base.copy_with(raw_path=base.raw_path + PATH.lstrip("/").encode()), _fixed_headers(
        client
    )


async def test_no_light_poster_where_the_request_would_differ() -> None:
    http = aiohttp_client("openai", 10.0)
    made = []
    for kwargs in (
        {"base_url": "http://127.0.0.1:9/v1?api-version=1"},
        {"base_url": "http://127.0.0.1:9/v1", "default_query": {"api-version": "1"}},
    ):
        client = openai.AsyncOpenAI(api_key="k", http_client=http, **kwargs)
        made.append(LightPost.for_client(client, http))
    plain = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", http_client=http)
    assert made == [None, None]
    assert LightPost.for_client(plain, None) is None  # the SDK's own HTTP client: not ours
    assert LightPost.for_client(plain, http) is not None
    await plain.close()


async def test_the_adapter_posts_light_from_its_second_request() -> None:
    async with serving() as server:
        server.replies = [json_reply(ANSWER)]
        cfg = ModelConfig(
            provider="openai", model="m", base_url=server.url, api_key=SecretStr("sk-test")
        )
        model = OpenAICompatModel("test", cfg)
        try:
            first = await model.complete([Message(role="user", content="hi")])
            assert model._light is not None
            second = await model.complete([Message(role="user", content="hi")])
        finally:
            await model.aclose()
    assert first.content == second.content == "ok"
    assert server.seen[0].headers == server.seen[1].headers
    assert server.seen[0].body == server.seen[1].body


async def test_the_httpx_transport_keeps_the_sdks_path() -> None:
    async with serving() as server:
        server.replies = [json_reply(ANSWER)]
        cfg = ModelConfig(
            provider="openai",
            model="m",
            base_url=server.url,
            api_key=SecretStr("sk-test"),
            http_transport="httpx",
        )
        model = OpenAICompatModel("test", cfg)
        try:
            await model.complete([Message(role="user", content="hi")])
            await model.complete([Message(role="user", content="hi")])
            assert model._light is None
        finally:
            await model.aclose()


async def test_a_cookie_the_server_set_is_sent_back_as_the_sdk_sends_it() -> None:
    """A gateway's session cookie (a load balancer's, Cloudflare's): the HTTP client keeps it
    and adds it to later requests, whichever way they are posted."""

    async def with_cookie(_request: web.Request) -> web.StreamResponse:
        response = web.json_response(ANSWER)
        response.set_cookie("lb", "node-7")
        return response

    sent: list[str | None] = []
    for light in (False, True):
        async with serving() as server:
            client, http = sdk_client(server.url, retries=0)
            try:
                server.replies = [json_reply(ANSWER)]
                await client.post("/chat/completions", body=BODY, cast_to=object)
                poster = LightPost.for_client(client, http)
                assert poster is not None
                server.replies = [json_reply(ANSWER), with_cookie, json_reply(ANSWER)]
                for _ in range(2):
                    if light:
                        await poster(BODY)
                    else:
                        await client.post("/chat/completions", body=BODY, cast_to=object)
                sent.append(server.seen[-1].headers.get("Cookie"))
            finally:
                await client.close()
    assert sent == ["lb=node-7", "lb=node-7"]


async def test_a_stream_is_the_same_request_and_the_same_chunks() -> None:
    (sdk, sdk_seen), (light, light_seen) = await both_ways(
        [sse_reply(*CHUNKS, "[DONE]")], stream=True
    )
    assert sdk == light == [{"choices": [{"delta": {"content": c}}]} for c in "ok"]
    assert comparable(light_seen[0].headers) == comparable(sdk_seen[0].headers)
    assert light_seen[0].body == sdk_seen[0].body


async def test_an_error_event_mid_stream_is_the_sdks_error() -> None:
    error = '{"error":{"message":"overloaded mid-stream"}}'
    (sdk, _), (light, _) = await both_ways([sse_reply(CHUNKS[0], error)], stream=True)
    same_error(sdk, light)
    assert "overloaded mid-stream" in str(light)


async def test_a_stream_refused_or_retried_as_the_sdk_does() -> None:
    refused = json_reply({"error": {"message": "stream_options unknown"}}, 400)
    (sdk, sdk_seen), (light, light_seen) = await both_ways([refused], retries=2, stream=True)
    same_error(sdk, light)
    assert isinstance(light, openai.BadRequestError)
    assert len(sdk_seen) == len(light_seen) == 1
    busy = json_reply({"error": {"message": "busy"}}, 503, **{"retry-after-ms": "10"})
    replies = [busy, sse_reply(*CHUNKS, "[DONE]")]
    (sdk, sdk_seen), (light, light_seen) = await both_ways(replies, retries=2, stream=True)
    assert sdk == light and len(light) == 2
    assert len(sdk_seen) == len(light_seen) == 2


async def test_the_adapter_streams_light_from_its_second_request() -> None:
    async with serving() as server:
        end = '{"choices":[{"delta":{},"finish_reason":"stop"}]}'
        server.replies = [sse_reply(*CHUNKS, end, "[DONE]")]
        cfg = ModelConfig(
            provider="openai", model="m", base_url=server.url, api_key=SecretStr("sk-test")
        )
        model = OpenAICompatModel("test", cfg, stream_usage=False)
        texts = []
        try:
            for _ in range(2):
                events = [e async for e in model.stream([Message(role="user", content="hi")])]
                texts.append("".join(getattr(e, "text", "") or "" for e in events))
                assert model._light is not None
        finally:
            await model.aclose()
    assert texts == ["ok", "ok"]
    assert comparable(server.seen[0].headers) == comparable(server.seen[1].headers)
    assert server.seen[0].body == server.seen[1].body
