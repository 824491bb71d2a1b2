"""GeminiModel against recorded generateContent traffic, replayed to the real `google-genai` SDK."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from providers.base import collect
from providers.config import ModelConfig, ThinkingConfig
from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
)
from providers.gemini import SIGNATURE, GeminiModel, to_gemini_contents
from providers.types import LLMResponse, Message, ThinkingBlock, ToolCall, ToolDefinition
from tests.fakes.cassette import Interaction, load_cassette
from tests.fakes.raw_replay import RawReplayServer, cut_off_after, json_reply, sse

CASSETTES = "google/"


@pytest.fixture
async def server() -> AsyncIterator[RawReplayServer]:
    async with RawReplayServer() as srv:
        srv.models = []  # type: ignore[attr-defined]
        yield srv
        for model in srv.models:  # type: ignore[attr-defined]
            await model.aclose()


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GeminiModel, "retry_initial_delay", 0.01)
    monkeypatch.setattr(GeminiModel, "retry_jitter", 0.0)


def make_model(server: RawReplayServer, model: str, **extra: Any) -> GeminiModel:
    cfg = ModelConfig(
        provider="gemini", model=model, api_key="g-test", base_url=server.url, **extra
    )
    adapter = GeminiModel("gemini", cfg)
    server.models.append(adapter)  # type: ignore[attr-defined]
    return adapter


def tool(name: str, description: str, model: type[BaseModel]) -> ToolDefinition:
    return ToolDefinition(name, description, model.model_json_schema())


class Country(BaseModel):
    country: str = Field(description="The country name.")


class City(BaseModel):
    city: str = Field(description="The city name.")


class NoArgs(BaseModel):
    pass


class CityLocation(BaseModel):
    city: str
    country: str


class Bar(BaseModel):
    bar: str


class Weather(BaseModel):
    city: str


class Topics(BaseModel):
    response: list[str]


def _start(first: dict[str, Any]) -> list[Message]:
    messages = []
    if "systemInstruction" in first:
        system = first["systemInstruction"]["parts"][0]["text"]
        messages.append(Message(role="system", content=system))
    messages.append(Message(role="user", content=first["contents"][0]["parts"][0]["text"]))
    return messages


def _normalise(contents: list[dict[str, Any]], ids: dict[str, str]) -> list[dict[str, Any]]:
    """Recorded contents in our terms: pydantic-ai's ids mapped to the ids we generated, and its
    `return_value` key to our `result` (both are free-form: Gemini reads any object)."""
    text = json.dumps(contents)
    for theirs, ours in ids.items():
        text = text.replace(theirs, ours)
    out = json.loads(text)
    for content in out:
        for part in content["parts"]:
            response = part.get("functionResponse", {}).get("response")
            if response is not None and "return_value" in response:
                response["result"] = response.pop("return_value")
    return out


async def replay(
    server: RawReplayServer,
    name: str,
    model_name: str,
    tools: list[ToolDefinition],
    *,
    stream: bool,
    turns: int | None = None,
) -> tuple[list[LLMResponse], list[Interaction]]:
    """Run a recorded conversation turn by turn through our adapter and check that every
    request after the first carries exactly the history the real client sent: the calls with
    our generated ids, their thought signatures on the same parts, and the results."""
    tape = load_cassette(CASSETTES + name)[:turns]
    server.queue = list(tape)
    model = make_model(server, model_name)
    messages = _start(tape[0].request_body)
    responses: list[LLMResponse] = []
    ids: dict[str, str] = {}
    for turn, interaction in enumerate(tape):
        if stream:
            response = await collect(model.stream(messages, tools))
        else:
            response = await model.complete(messages, tools)
        responses.append(response)
        sent = server.bodies()[turn]
        recorded = interaction.request_body
        assert sent["contents"] == _normalise(recorded["contents"], ids), f"turn {turn}"
        assert sent.get("systemInstruction") == recorded.get("systemInstruction")
        if turn + 1 == len(tape):
            break
        messages.append(response.as_message())
        # The real client's next request: learn its ids for our calls, feed back its results.
        next_contents = tape[turn + 1].request_body["contents"]
        model_turn, results = next_contents[len(sent["contents"])], next_contents[-1]
        recorded_calls = [p["functionCall"] for p in model_turn["parts"] if "functionCall" in p]
        assert [c["name"] for c in recorded_calls] == [c.name for c in response.tool_calls]
        for recorded_call, ours in zip(recorded_calls, response.tool_calls, strict=True):
            ids[recorded_call["id"]] = ours.id
        for part in results["parts"]:
            fr = part["functionResponse"]
            error = "error" in fr["response"]
            messages.append(
                Message(
                    role="tool",
                    tool_call_id=ids[fr["id"]],
                    name=fr["name"],
                    is_error=error,
                    content=fr["response"]["error" if error else "return_value"],
                )
            )
    return responses, tape


def _sig(interaction: Interaction, index: int = 0) -> str | None:
    """The standard-base64 thoughtSignature on the index-th part of a recorded response."""
    return (
        interaction.json_body["candidates"][0]["content"]["parts"][index].get("thoughtSignature")
        if interaction.json_body
        else None
    )


# ------------------------------------------------------------------------- recorded replays


async def test_error_result_and_thought_signatures(server: RawReplayServer) -> None:
    responses, tape = await replay(
        server,
        "test_google_model_retry.yaml",
        "gemini-2.5-pro",
        [tool("get_capital", "Get the capital of a country.", Country)],
        stream=False,
    )
    first, second, final = responses
    assert [json.loads(c.arguments) for c in first.tool_calls] == [{"country": "France"}]
    assert first.tool_calls[0].provider_data == {SIGNATURE: _sig(tape[0])}
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (57, 15 + 124)
    assert json.loads(second.tool_calls[0].arguments) == {"country": "La France"}
    assert first.tool_calls[0].id != second.tool_calls[0].id
    assert final.content == "Paris" and final.finish_reason == "stop"
    # The signature Gemini put on the final text part is kept for replay.
    assert final.thinking == [ThinkingBlock(signature=_sig(tape[2]), provider="gemini")]
    sent = server.bodies()
    # The recorded error: an `error` response, the name, and our id on both sides.
    assert sent[1]["contents"][2]["parts"][0]["functionResponse"] == {
        "id": first.tool_calls[0].id,
        "name": "get_capital",
        "response": {
            "error": 'The country is not supported. Use "La France" instead.\n\n'
            "Fix the errors and try again."
        },
    }
    call_part = sent[1]["contents"][1]["parts"][0]
    assert base64.urlsafe_b64decode(call_part["thoughtSignature"]) == base64.b64decode(
        _sig(tape[0])
    )
    for received in server.received:
        assert received.path == "/v1beta/models/gemini-2.5-pro:generateContent"
        headers = {k.lower(): v for k, v in received.headers.items()}
        assert headers["x-goog-api-key"] == "g-test"


async def test_parallel_calls_only_first_signed(server: RawReplayServer) -> None:
    tools = [
        tool("generate_topic", "", NoArgs),
        tool("final_result", "The final response which ends this conversation", Topics),
    ]
    responses, tape = await replay(
        server,
        "test_google_instructions_only_with_tool_calls.yaml",
        "gemini-3-flash-preview",
        tools,
        stream=False,
    )
    first = responses[0]
    assert [c.name for c in first.tool_calls] == ["generate_topic"] * 3
    assert len({c.id for c in first.tool_calls}) == 3
    assert first.tool_calls[0].provider_data == {SIGNATURE: _sig(tape[0])}
    assert [c.provider_data for c in first.tool_calls[1:]] == [None, None]
    results = server.bodies()[1]["contents"][2]["parts"]
    assert [p["functionResponse"]["id"] for p in results] == [c.id for c in first.tool_calls]
    assert json.loads(responses[-1].tool_calls[0].arguments)["response"][0].startswith(
        "What kind of car does a sheep drive?"
    )
    assert server.bodies()[0]["contents"][0] == {"parts": [{"text": ""}], "role": "user"}


async def test_stream_whole_function_calls(server: RawReplayServer) -> None:
    tools = [
        tool("get_capital", "Get the capital of a country.", Country),
        tool("get_temperature", "Get the temperature in a city.", City),
    ]
    responses, tape = await replay(
        server, "test_google_model_iter_stream.yaml", "gemini-2.0-flash", tools, stream=True
    )
    assert [c.name for r in responses for c in r.tool_calls] == ["get_capital", "get_temperature"]
    assert responses[2].content == "The temperature in Paris is 30°C.\n"
    # The old-style OpenAPI schema the real client sent is exactly what our rewrite produces.
    for body, interaction in zip(server.bodies(), tape, strict=True):
        assert body["tools"] == interaction.request_body["tools"]
    assert server.received[0].path == "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    assert server.received[0].query == {"alt": "sse"}


async def test_stream_events_and_streamed_signature(server: RawReplayServer) -> None:
    tape = load_cassette(CASSETTES + "test_google_streaming_tool_call_thought_signature.yaml")
    server.queue = list(tape)
    model = make_model(server, "gemini-3-pro-preview")
    tools = [tool("get_country", "", NoArgs)]
    question = "What is the capital of the user country? Call the tool"
    messages = [Message(role="user", content=question)]
    events = [e async for e in model.stream(messages, tools)]
    assert [e.type for e in events] == ["tool_call_start", "tool_call_end", "done"]
    call = events[-1].response.tool_calls[0]
    assert events[0].tool_call == events[1].tool_call == call
    assert call.provider_data[SIGNATURE].startswith("EpwICpkIAXLI2nxlU6gsWZaZHRYk")
    messages += [
        events[-1].response.as_message(),
        Message(role="tool", tool_call_id=call.id, name="get_country", content="Mexico"),
    ]
    events = [e async for e in model.stream(messages, tools)]
    assert [e.text for e in events if e.type == "text"] == [
        "The capital of Mexico",
        " is Mexico City.",
    ]
    assert events[-1].response.content == "The capital of Mexico is Mexico City."
    recorded = _normalise(
        tape[1].request_body["contents"],
        {tape[1].request_body["contents"][1]["parts"][0]["functionCall"]["id"]: call.id},
    )
    assert server.bodies()[1]["contents"] == recorded


@pytest.mark.parametrize(
    ("name", "model_name", "tools"),
    [
        (
            "test_google_tool_config_any_with_tool_without_args.yaml",
            "gemini-2.0-flash",
            [
                tool("bar", "", NoArgs),
                tool("final_result", "The final response which ends this conversation", Bar),
            ],
        ),
        (
            "test_google_tool_output.yaml",
            "gemini-2.0-flash",
            [
                tool("get_user_country", "", NoArgs),
                tool(
                    "final_result", "The final response which ends this conversation", CityLocation
                ),
            ],
        ),
        (
            "tool_choice_auto.yaml",
            "gemini-2.5-flash",
            [tool("get_weather", "Get the current weather for a city.", Weather)],
        ),
    ],
)
async def test_recorded_tool_runs(
    server: RawReplayServer, name: str, model_name: str, tools: list[ToolDefinition]
) -> None:
    responses, tape = await replay(server, name, model_name, tools, stream=False)
    assert responses[0].tool_calls and responses[0].tool_calls[0].id.startswith("call_")
    if "parameters" in tape[0].request_body["tools"][0]["functionDeclarations"][0]:
        # Old-style declarations: ours match exactly, except that an argument-less tool has no
        # `parameters` at all (optional in the API; google-genai's own
        # FunctionDeclaration.from_callable leaves it out too) where the recording sent an
        # empty OBJECT.
        expected = copy.deepcopy(tape[0].request_body["tools"])
        empty = {"properties": {}, "type": "OBJECT"}
        for declaration in expected[0]["functionDeclarations"]:
            if declaration.get("parameters") == empty:
                del declaration["parameters"]
        assert server.bodies()[0]["tools"] == expected
        no_args = [t.name for t in tools if not t.parameters.get("properties")]
        sent = server.bodies()[0]["tools"][0]["functionDeclarations"]
        assert [d["name"] for d in sent if "parameters" not in d] == no_args


# ------------------------------------------------------------------------- scripted cases


def _chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "modelVersion": "gemini-test",
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
    }


_CALL = {"functionCall": {"name": "reminder_set", "args": {"text": "stand up"}}}


async def test_stream_without_finish_reason_is_interrupted(server: RawReplayServer) -> None:
    body = sse([_chunk([{"text": "Setting it"}]), _chunk([_CALL])], named=False)
    server.queue = [Interaction(None, "", 200, raw_body=body, content_type="text/event-stream")]
    seen: list[str] = []
    with pytest.raises(StreamInterrupted, match="finishReason"):
        async for event in make_model(server, "gemini-test").stream(
            [Message(role="user", content="remind me")]
        ):
            seen.append(event.type)
    assert "done" not in seen


async def test_stream_connection_cut(server: RawReplayServer) -> None:
    body = sse([_chunk([{"text": "Setting it"}])], named=False) + 'data: {"candidates": [{"con'
    server.queue = [cut_off_after(body)]
    seen: list[str] = []
    with pytest.raises(StreamInterrupted):
        async for event in make_model(server, "gemini-test", max_retries=0).stream(
            [Message(role="user", content="remind me")]
        ):
            seen.append(event.type)
    assert "tool_call_end" not in seen and "done" not in seen


_QUOTA = {
    "error": {
        "code": 429,
        "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
    }
}


async def test_429_then_success(server: RawReplayServer) -> None:
    server.queue = [json_reply(_QUOTA, 429), json_reply(_chunk([{"text": "hello"}], "STOP"))]
    response = await make_model(server, "gemini-test", max_retries=2).complete(
        [Message(role="user", content="hi")]
    )
    assert response.content == "hello" and len(server.received) == 2


async def test_error_statuses(server: RawReplayServer) -> None:
    server.queue = [json_reply(_QUOTA, 429)]
    with pytest.raises(ProviderRateLimited):
        await make_model(server, "gemini-test", max_retries=0).complete(
            [Message(role="user", content="hi")]
        )
    bad = {
        "error": {
            "code": 400,
            "message": "Please ensure that function call turn comes immediately after a user turn",
            "status": "INVALID_ARGUMENT",
        }
    }
    server.queue = [json_reply(bad, 400)]
    with pytest.raises(ProviderBadRequest) as info:
        await make_model(server, "gemini-test").complete([Message(role="user", content="hi")])
    assert info.value.status == 400 and "function call turn" in str(info.value)
    server.queue = [json_reply(bad, 400)]
    with pytest.raises(ProviderBadRequest):
        await collect(make_model(server, "gemini-test").stream([Message(role="user", content="x")]))
    key = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
        }
    }
    server.queue = [json_reply(key, 400)]
    with pytest.raises(ProviderAuthError):
        await make_model(server, "gemini-test").complete([Message(role="user", content="hi")])
    server.queue = [
        json_reply({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}, 503)
    ]
    with pytest.raises(ProviderUnavailable):
        await make_model(server, "gemini-test", max_retries=0).complete(
            [Message(role="user", content="hi")]
        )


async def test_thinking_parts_and_config(server: RawReplayServer) -> None:
    server.queue = [
        json_reply(
            _chunk(
                [
                    {"text": "Let me think.", "thought": True},
                    {"text": "Here.", "thoughtSignature": base64.b64encode(b"sig-text").decode()},
                ],
                "STOP",
            )
        )
    ]
    model = make_model(
        server, "gemini-test", thinking=ThinkingConfig(enabled=True, budget_tokens=2048)
    )
    response = await model.complete([Message(role="user", content="hi")])
    assert response.content == "Here."
    assert response.thinking == [
        ThinkingBlock(text="Let me think.", provider="gemini"),
        ThinkingBlock(signature=base64.b64encode(b"sig-text").decode(), provider="gemini"),
    ]
    config = server.bodies()[0]["generationConfig"]
    # This SDK version serialises thinkingConfig's fields in snake_case; the API takes both.
    assert config["thinkingConfig"] in (
        {"includeThoughts": True, "thinkingBudget": 2048},
        {"include_thoughts": True, "thinking_budget": 2048},
    )
    # Replayed: the thought as a thought part, the text with its signature.
    _, contents = to_gemini_contents([response.as_message()])
    parts = contents[0].parts
    assert (parts[0].thought, parts[0].text) == (True, "Let me think.")
    assert (parts[1].text, parts[1].thought_signature) == ("Here.", b"sig-text")


def test_contents_conversion() -> None:
    messages = [
        Message(role="system", content="be brief"),
        Message(role="user", content="hi"),
        Message(
            role="assistant",
            content=None,
            tool_calls=[
                ToolCall(
                    id="a",
                    name="f",
                    arguments='{"x": 1}',
                    provider_data={SIGNATURE: base64.b64encode(b"s").decode()},
                ),
                ToolCall(id="b", name="g", arguments="{broken"),
            ],
            thinking=[ThinkingBlock(text="anthropic's", signature="x", provider="anthropic")],
        ),
        Message(role="tool", tool_call_id="a", name="f", content="1"),
        Message(role="tool", tool_call_id="b", content="bad JSON", is_error=True),
    ]
    system, contents = to_gemini_contents(messages)
    assert system == "be brief"
    assert [c.role for c in contents] == ["user", "model", "user"]
    calls = contents[1].parts
    assert len(calls) == 2 and calls[0].thought_signature == b"s"
    assert calls[1].function_call.args == {} and calls[1].thought_signature is None
    responses = [p.function_response for p in contents[2].parts]
    assert [(r.id, r.name, r.response) for r in responses] == [
        ("a", "f", {"result": "1"}),
        ("b", "g", {"error": "bad JSON"}),
    ]  # name found by id


async def test_timeout(server: RawReplayServer) -> None:
    server.latency = 1.0
    with pytest.raises(ProviderTimeout):
        await make_model(server, "gemini-test", timeout=0.2, max_retries=0).complete(
            [Message(role="user", content="hi")]
        )
