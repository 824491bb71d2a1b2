"""The SDKs' aiohttp transport under OpenAI-compatible and Anthropic models (providers/sdk_http.py):
used by default, `http_transport: httpx` keeps the SDK's own stack, and a server that is down or
hangs up is reported as unreachable (ProviderUnavailable), not as a timeout, on both stacks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from providers.anthropic import AnthropicModel
from providers.base import ChatModel, collect
from providers.config import ModelConfig
from providers.errors import ProviderTimeout, ProviderUnavailable, StreamInterrupted
from providers.openai_compat import OpenAICompatModel
from providers.types import Message
from tests.fakes.cassette import ReplayServer, openai_chat_response
from tests.providers.helpers import chunk, make_model, sse, sse_response

USER = [Message(role="user", content="hi")]
Conn = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(on_connection: Conn) -> AsyncIterator[str]:
    """A TCP server speaking as much HTTP as `on_connection` writes; yields its base URL."""
    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


def model_at(url: str, transport: str, provider: str = "openai", **cfg: object) -> ChatModel:
    config = ModelConfig(
        provider=provider,  # type: ignore[arg-type]
        model="m",
        api_key="k",
        base_url=url,
        max_retries=0,
        http_transport=transport,  # type: ignore[arg-type]
        **cfg,  # type: ignore[arg-type]
    )
    if provider == "anthropic":
        return AnthropicModel("test", config)
    return OpenAICompatModel("test", config)


def _sdk_client(model: ChatModel) -> object:
    if isinstance(model, AnthropicModel):
        return model.client._client
    return model._client._client  # type: ignore[attr-defined]


BOTH = pytest.mark.parametrize(
    ("provider", "transport"),
    [(p, t) for p in ("openai", "anthropic") for t in ("aiohttp", "httpx")],
)


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_aiohttp_transport_is_the_default_and_httpx_can_be_chosen(provider: str) -> None:
    aio = model_at("http://127.0.0.1:9/v1", "aiohttp", provider)
    plain = model_at("http://127.0.0.1:9/v1", "httpx", provider)
    assert "Aiohttp" in " ".join(c.__name__ for c in type(_sdk_client(aio)).__mro__)
    assert "Aiohttp" not in " ".join(c.__name__ for c in type(_sdk_client(plain)).__mro__)
    assert ModelConfig(provider=provider, model="m").http_transport == "aiohttp"  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_answers_and_streams_on_both_stacks(transport: str) -> None:
    async with ReplayServer() as srv:
        srv.queue.append(lambda _r: web.json_response(openai_chat_response("hello")))
        model = make_model(srv, http_transport=transport)
        assert (await model.complete(USER)).content == "hello"
        body = sse(
            [
                chunk({"role": "assistant", "content": "stre"}),
                chunk({"content": "amed"}, "stop"),
                "[DONE]",
            ]
        )
        srv.queue.append(lambda _r: sse_response(body))
        streaming = make_model(srv, http_transport=transport, streaming=True)
        assert (await collect(streaming.stream(USER))).content == "streamed"
        await model.aclose()
        await streaming.aclose()


@BOTH
async def test_a_server_that_hangs_up_is_unavailable_not_a_timeout(
    provider: str, transport: str
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.close()

    async with raw_server(hang_up) as url:
        model = model_at(url, transport, provider)
        with pytest.raises(ProviderUnavailable) as caught:
            await model.complete(USER)
        assert not isinstance(caught.value, ProviderTimeout)
        await model.aclose()


@BOTH
async def test_a_refused_connection_is_unavailable(provider: str, transport: str) -> None:
    async with raw_server(lambda r, w: asyncio.sleep(0)) as url:
        pass  # closed: its port now refuses
    model = model_at(url, transport, provider)
    with pytest.raises(ProviderUnavailable) as caught:
        await model.complete(USER)
    assert not isinstance(caught.value, ProviderTimeout)
    await model.aclose()


@BOTH
async def test_a_silent_server_is_still_a_timeout(provider: str, transport: str) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await reader.read()  # silent until the client gives up and hangs up
        writer.close()

    async with raw_server(silent) as url:
        model = model_at(url, transport, provider, timeout=0.5)
        with pytest.raises(ProviderTimeout):
            await model.complete(USER)
        await model.aclose()


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_a_stream_cut_by_the_server_is_not_a_timeout(transport: str) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        event = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        event += b'"choices":[{"index":0,"delta":{"content":"hel"}}]}\n\n'
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        writer.close()  # mid-body: no last chunk

    async with raw_server(cut) as url:
        model = model_at(url, transport, streaming=True)
        with pytest.raises(StreamInterrupted) as caught:
            await collect(model.stream(USER))
        assert "timed out" not in str(caught.value), caught.value
        await model.aclose()
