"""Scripted cases the recordings lack: cut-off streams, rate limits, refusals of `tools`,
server errors, hangs, and request details (optional parameters, reasoning replay rules)."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from aiohttp import web

from providers.base import collect
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
    ToolsNotSupported,
)
from providers.openai_errors import tools_not_supported
from providers.types import Message, ThinkingBlock, ToolCall, ToolDefinition
from tests.fakes.cassette import Interaction, ReplayServer, load_cassette, openai_chat_response
from tests.providers.helpers import chunk, make_model, model_for, reply, run, sse, sse_response

USER = [Message(role="user", content="weather in Paris?")]
TOOLS = [
    ToolDefinition(
        "get_weather",
        "Weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    )
]


def ok(content: str = "fine") -> Interaction:
    return Interaction(
        None, "/v1/chat/completions", 200, json_body=openai_chat_response(content=content)
    )


def error(status: int, message: str, headers: dict[str, str] | None = None):
    def handler(_req: object) -> web.Response:
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error"}},
            status=status,
            headers=headers,
        )

    return handler


# -- streams cut short ------------------------------------------------------------------------

CALL_START = chunk(
    {
        "role": "assistant",
        "tool_calls": [
            {
                "index": 0,
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ],
    }
)
CALL_ARGS = chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]})


async def test_stream_without_finish_reason_is_interrupted(server: ReplayServer) -> None:
    server.queue = [lambda _r: sse_response(sse([CALL_START, CALL_ARGS]))]
    model = make_model(server)
    seen = []
    with pytest.raises(StreamInterrupted, match="get_weather"):
        async for event in model.stream(USER, TOOLS):
            seen.append(event.type)
    assert "tool_call_end" not in seen and "done" not in seen
    assert seen[:2] == ["tool_call_start", "tool_call_delta"]


async def test_connection_dropped_mid_call_is_interrupted(server: ReplayServer) -> None:
    async def body():  # the handler gets no raw request, so break the body instead
        yield sse([CALL_START, CALL_ARGS]).encode()
        await asyncio.sleep(0.05)
        raise ConnectionResetError("cut")  # aiohttp drops the connection mid chunked body

    def handler(_r: object) -> web.Response:
        return web.Response(body=body(), content_type="text/event-stream")

    server.queue = [handler]
    with pytest.raises(StreamInterrupted) as info:
        await run(make_model(server), USER, TOOLS, stream=True)
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


async def test_stream_error_event_is_interrupted(server: ReplayServer) -> None:
    body = sse([CALL_START, {"error": {"message": "overloaded", "type": "server_error"}}])
    server.queue = [lambda _r: sse_response(body)]
    with pytest.raises(StreamInterrupted, match="overloaded"):
        await run(make_model(server), USER, TOOLS, stream=True)


async def test_stream_without_ids_or_usage(server: ReplayServer) -> None:
    # Some compatible servers: no call ids, the whole call in one delta, no index, no usage.
    body = sse(
        [
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"A"}'},
                        }
                    ],
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"B"}'},
                        }
                    ]
                }
            ),
            chunk({}, finish="tool_calls"),
            "[DONE]",
        ]
    )
    server.queue = [lambda _r: sse_response(body), ok("done")]
    model = make_model(server, stream_usage=False)
    response, events = await run(model, USER, TOOLS, stream=True)
    assert "stream_options" not in server.received[0].body
    a, b = response.tool_calls
    assert a.id != b.id and a.id.startswith("call_") and b.id.startswith("call_")
    assert [a.parsed_arguments(), b.parsed_arguments()] == [{"city": "A"}, {"city": "B"}]
    starts = [e.tool_call.id for e in events if e.type == "tool_call_start"]
    assert starts == [a.id, b.id] and response.usage is None
    # The generated ids go back unchanged with their results.
    history = [
        *USER,
        response.as_message(),
        Message(role="tool", tool_call_id=a.id, content="sun"),
        Message(role="tool", tool_call_id=b.id, content="rain"),
    ]
    await model.complete(history, TOOLS)
    sent = server.received[1].body["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == [a.id, b.id]
    assert [m["tool_call_id"] for m in sent[2:]] == [a.id, b.id]


async def test_duplicate_ids_in_one_response_are_made_unique(server: ReplayServer) -> None:
    body = openai_chat_response(
        tool_calls=[
            {"id": "call_0", "name": "get_weather", "arguments": {"city": "A"}},
            {"id": "call_0", "name": "get_weather", "arguments": {"city": "B"}},
        ]
    )
    server.queue = [Interaction(None, "", 200, json_body=body)]
    response = await make_model(server).complete(USER, TOOLS)
    assert response.tool_calls[0].id == "call_0" and response.tool_calls[1].id != "call_0"


# -- HTTP errors ------------------------------------------------------------------------------


async def test_429_then_success_is_retried_by_the_sdk(server: ReplayServer) -> None:
    server.queue = [error(429, "Rate limit reached", {"retry-after-ms": "1"}), ok("after retry")]
    response = await make_model(server, max_retries=1).complete(USER)
    assert response.content == "after retry" and len(server.received) == 2


async def test_429_without_retries_left(server: ReplayServer) -> None:
    server.queue = [error(429, "Rate limit reached", {"retry-after-ms": "1"})]
    with pytest.raises(ProviderRateLimited) as info:
        await make_model(server, max_retries=0).complete(USER)
    assert info.value.status == 429 and info.value.retryable


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_tools_refused_is_tools_not_supported(server: ReplayServer, stream: bool) -> None:
    server.queue = [error(400, "registry.ollama.ai/library/gemma:2b does not support tools")]
    with pytest.raises(ToolsNotSupported) as info:
        await run(make_model(server), USER, TOOLS, stream)
    assert info.value.status == 400


async def test_recorded_web_search_400_is_a_plain_bad_request(server: ReplayServer) -> None:
    # "Web search options not supported with this model." is about web_search_options, not
    # tools: downgrading to prompt-based tools would not help, so it must not match.
    [interaction] = load_cassette("openai/test_openai_web_search_tool_model_not_supported.yaml")
    server.queue = [interaction]
    with pytest.raises(ProviderBadRequest) as info:
        await make_model(server, "gpt-4o").complete(USER)
    assert type(info.value) is ProviderBadRequest and info.value.status == 400
    assert "Web search options not supported" in str(info.value)


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (500, ProviderUnavailable),
        (503, ProviderUnavailable),
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (404, ProviderBadRequest),
        (422, ProviderBadRequest),
    ],
)
async def test_status_mapping(server: ReplayServer, status: int, exc: type) -> None:
    server.queue = [error(status, "nope")]
    with pytest.raises(exc) as info:
        await make_model(server).complete(USER, TOOLS)
    assert type(info.value) is exc and info.value.status == status


async def test_pydantic_extra_inputs_on_tools_is_tools_not_supported(server: ReplayServer) -> None:
    def handler(_r: object) -> web.Response:
        detail = [
            {
                "type": "extra_forbidden",
                "loc": ["body", "tools"],
                "msg": "Extra inputs are not permitted",
            }
        ]
        return web.json_response({"detail": detail}, status=422)

    server.queue = [handler]
    with pytest.raises(ToolsNotSupported):
        await make_model(server).complete(USER, TOOLS)


async def test_server_that_hangs_times_out(server: ReplayServer) -> None:
    release = asyncio.Event()

    async def hang(_r: object) -> web.Response:
        await release.wait()
        return web.json_response(openai_chat_response("late"))

    server.queue = [hang]
    model = make_model(server, timeout=0.3, max_retries=0)
    try:
        with pytest.raises(ProviderTimeout):
            await model.complete(USER)
    finally:
        release.set()


async def test_connection_refused_is_unavailable() -> None:
    async with ReplayServer() as srv:
        model = make_model(srv)
    with pytest.raises(ProviderUnavailable):
        await model.complete(USER)


@pytest.mark.parametrize(
    "text",
    [
        "registry.ollama.ai/library/gemma:2b does not support tools",
        "deepseek-reasoner does not support Function Calling",
        "Unsupported parameter: 'tools' is not supported with this model.",
        "tool calling is not supported with this model",
        "Tool use is not supported for this model",
        "`tools` and `functions` are not supported by this endpoint",
        "Unrecognized request argument supplied: tools",
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "tools param requires --jinja flag",
        "No endpoints found that support tool use.",
        'Extra inputs are not permitted {"loc": ["body", "tools"]}',
    ],
)
def test_tools_not_supported_patterns(text: str) -> None:
    assert tools_not_supported(text)


@pytest.mark.parametrize(
    "text",
    [
        "Web search options not supported with this model.",
        "Invalid schema for function 'get_weather': 'foo' is not valid",
        "The model `gpt-9` does not exist",
        "Extra inputs are not permitted: temperature_x",
        "This model's maximum context length is 8192 tokens",
    ],
)
def test_other_errors_do_not_match(text: str) -> None:
    assert not tools_not_supported(text)


def test_extra_input_inside_a_tool_is_not_tools_not_supported() -> None:
    from providers.openai_errors import tools_not_supported

    detail = {
        "detail": [
            {
                "type": "extra_forbidden",
                "msg": "Extra inputs are not permitted",
                "loc": ["body", "tools", 0, "function", "strict"],
                "input": True,
            }
        ]
    }
    assert not tools_not_supported(f"Error code: 422 {json.dumps(detail)}")
    detail["detail"][0]["loc"] = ["body", "tools"]
    assert tools_not_supported(f"Error code: 422 {json.dumps(detail)}")


# -- request details --------------------------------------------------------------------------


async def test_optional_parameters_only_when_set(server: ReplayServer) -> None:
    server.queue = [ok(), ok()]
    await make_model(server).complete(USER)
    await make_model(server, temperature=0.2, max_tokens=50).complete(USER)
    plain, tuned = server.bodies()
    assert set(plain) == {"model", "messages"}
    assert (tuned["temperature"], tuned["max_tokens"]) == (0.2, 50)
    assert server.received[0].headers["Authorization"] == "Bearer test-key"


async def test_reasoning_from_earlier_user_turns_is_not_sent(server: ReplayServer) -> None:
    think = [ThinkingBlock(text="old thoughts", provider="deepseek")]
    call = ToolCall("c1", "get_weather", '{"city":"Paris"}')
    history = [
        Message(role="system", content="be brief"),
        Message(role="user", content="q1"),
        Message(role="assistant", tool_calls=[call], thinking=think),
        Message(role="tool", tool_call_id="c1", content="sun"),
        Message(role="assistant", content="Sunny.", thinking=think),
        Message(role="user", content="q2"),
        Message(
            role="assistant",
            tool_calls=[ToolCall("c2", "get_weather", "{}")],
            thinking=[
                ThinkingBlock(text="new", provider="deepseek"),
                ThinkingBlock(text="sig", signature="x", provider="anthropic"),
            ],
        ),
        Message(role="tool", tool_call_id="c2", content="rain"),
    ]
    server.queue = [ok()]
    await make_model(server, "deepseek-reasoner").complete(history, TOOLS)
    sent = server.received[0].body["messages"]
    assert [m.get("reasoning_content") for m in sent] == [None] * 6 + ["new", None]
    assert sent[4] == {"role": "assistant", "content": "Sunny."}


async def test_gemini_compat_extra_content_round_trips(server: ReplayServer) -> None:
    body = openai_chat_response(tool_calls=[{"id": "", "name": "get_weather", "arguments": "{}"}])
    extra = {"google": {"thought_signature": "c2ln"}}
    body["choices"][0]["message"]["tool_calls"][0]["extra_content"] = extra
    server.queue = [Interaction(None, "", 200, json_body=body), ok()]
    model = make_model(server)
    response = await model.complete(USER, TOOLS)
    [call] = response.tool_calls
    assert call.provider_data == {"extra_content": extra}
    await model.complete(
        [*USER, response.as_message(), Message(role="tool", tool_call_id=call.id, content="x")],
        TOOLS,
    )
    sent_call = server.received[1].body["messages"][1]["tool_calls"][0]
    assert sent_call["extra_content"] == extra and sent_call["id"] == call.id
    assert json.dumps(server.received[1].body)  # plain JSON all the way


# -- OpenAI-compatible servers that send arguments as a JSON object -----------------------------

HI = [Message(role="user", content="hi")]
F_TOOLS = [ToolDefinition("f", "d", {"type": "object", "properties": {"a": {"type": "string"}}})]


def _call_completion(arguments: object) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return json.dumps({"choices": [choice]})


async def test_openai_object_arguments_become_json_text(server: ReplayServer) -> None:
    server.queue = [reply(_call_completion({"a": "x"}))]
    model = model_for("openai", server)
    response = await model.complete(HI, F_TOOLS)
    await model.aclose()
    call = response.tool_calls[0]
    assert isinstance(call.arguments, str)
    assert call.parsed_arguments() == {"a": "x"}


async def test_openai_streamed_object_arguments_become_json_text(server: ReplayServer) -> None:
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": "x"}},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    server.queue = [reply(body, "text/event-stream")]
    model = model_for("openai", server)
    response = await collect(model.stream(HI, F_TOOLS))
    await model.aclose()
    assert response.tool_calls[0].parsed_arguments() == {"a": "x"}
