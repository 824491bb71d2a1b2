"""A prompt longer than the model's window (issue 11 §4b): every provider's refusal, in its real
error body, is a ContextLengthExceeded; the turn is retried once with the history cut to fit; the
user is told plainly when even that fails; and the oversized message does not make the chat's
later turns fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatfn.common.i18n import translate
from chatfn.testing import TestBot
from function_calls.conversation import estimate_message_tokens as estimate_tokens
from function_calls.conversation import fit_messages
from providers.errors import ContextLengthExceeded, ProviderBadRequest, error_for_status
from providers.factory import build_model
from providers.types import Message
from tests.fakes.protocols import Protocol, Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer, json_reply

# The bodies each server sends for a prompt over a 4096-token window, as they send them.
ERRORS: dict[str, tuple[Protocol, dict[str, Any]]] = {
    "openai": (
        "openai",
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. However, your "
                "messages resulted in 9012 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "vllm": (
        "openai",
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 9012 tokens (8012 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llama.cpp": (
        "openai",
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9012,
                "n_ctx": 4096,
            }
        },
    ),
    "llama-cpp-python": (
        "openai",
        {
            "error": {
                "message": "Requested tokens (9012) exceed context window of 4096",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "anthropic": (
        "anthropic",
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 9012 tokens > 4096 maximum",
            },
        },
    ),
    "gemini": (
        "gemini",
        {
            "error": {
                "code": 400,
                "message": "The input token count (9012) exceeds the maximum number of tokens "
                "allowed (4096).",
                "status": "INVALID_ARGUMENT",
            }
        },
    ),
}
HUGE = "lorem ipsum " * 1500  # 18,000 characters: ~6,000 tokens


def _request_text(body: dict[str, Any]) -> str:
    """Every text a request carries, whatever its protocol."""

    return json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("server_kind", list(ERRORS))
async def test_refused_for_length_is_retried_cut_to_fit(tmp_path: Path, server_kind: str) -> None:
    protocol, error = ERRORS[server_kind]
    async with RawReplayServer() as server:
        server.queue = [
            json_reply(error, status=400),
            *replies(protocol, [Turn(text="Read it."), Turn(text="Hello again.")], stream=False),
        ]
        model = build_model("main", model_config(protocol, server.url, thinking=False))
        tb = TestBot(tmp_path, model=model, builtins=False)
        try:
            first = await tb.send(HUGE)
            later = await tb.send("hi")
        finally:
            await tb.aclose()
    assert first == ["Read it."]
    assert later == ["Hello again."]  # the big message does not poison the chat
    bodies = server.bodies()
    assert len(bodies) == 3  # refused, retried once, then the next turn in one request
    refused, retried, next_turn = (_request_text(b) for b in bodies)
    assert HUGE.strip() in refused
    assert "did not fit the model's context window" in retried
    assert len(retried) < 4096 * 3 < len(refused)
    # The window was learned from the error: the next turn is cut before it is sent.
    assert "hi" in next_turn and len(next_turn) < 4096 * 3
    rows = tb.bot.storage.chat_state.usage_rows()
    assert [r.outcome for r in rows] == ["ContextLengthExceeded", "ok", "ok"]


@pytest.mark.parametrize("server_kind", ["openai", "anthropic", "gemini"])
async def test_user_told_plainly_when_even_the_cut_fails(tmp_path: Path, server_kind: str) -> None:
    protocol, error = ERRORS[server_kind]
    async with RawReplayServer() as server:
        server.queue = [
            json_reply(error, status=400),
            json_reply(error, status=400),
            *replies(protocol, [Turn(text="Fine now.")], stream=False),
        ]
        model = build_model("main", model_config(protocol, server.url, thinking=False))
        tb = TestBot(tmp_path, model=model, builtins=False)
        try:
            first = await tb.send(HUGE)
            later = await tb.send("and now?")
        finally:
            await tb.aclose()
    assert first == [translate("en", "core.too_long")]
    assert later == ["Fine now."]
    assert len(server.bodies()) == 3  # one retry, not a loop


@pytest.mark.parametrize("server_kind", list(ERRORS))
def test_each_servers_text_is_context_length(server_kind: str) -> None:

    _, body = ERRORS[server_kind]
    err = error_for_status(400, json.dumps(body), "p")
    assert isinstance(err, ContextLengthExceeded) and err.limit == 4096


def test_other_bad_requests_stay_bad_requests() -> None:
    err = error_for_status(400, '{"error": {"message": "Invalid value for temperature"}}', "p")
    assert type(err) is ProviderBadRequest
    # A 500 mentioning the context is an outage, not a reason to cut the history.
    assert not isinstance(error_for_status(500, "context window", "p"), ContextLengthExceeded)


def _turns(n: int, size: int) -> list[Message]:
    out = [Message(role="system", content="sys")]
    for i in range(n):
        out += [
            Message(role="user", content=f"q{i} " + "x" * size),
            Message(role="assistant", content=f"a{i} " + "y" * size),
        ]
    return out


def test_fit_drops_oldest_turns_whole() -> None:
    messages = [*_turns(6, 300), Message(role="user", content="now")]
    budget = estimate_tokens(messages[:1] + messages[-5:])
    cut = fit_messages(messages, budget)
    assert cut[0].content == "sys" and cut[-1].content == "now"
    assert cut[1].role == "user"  # a reply never loses its question
    assert [m.content[:2] for m in cut[1:-1]] == ["q4", "a4", "q5", "a5"]
    assert estimate_tokens(cut) <= budget


def test_fit_truncates_the_oversized_current_message_with_a_note() -> None:
    messages = [Message(role="system", content="sys"), Message(role="user", content="z" * 30000)]
    cut = fit_messages(messages, 1000)
    assert cut[0].content == "sys"
    assert cut[1].content.startswith("z" * 100)
    assert "did not fit the model's context window" in cut[1].content
    assert estimate_tokens(cut) <= 1000


def test_fit_keeps_the_current_tool_rounds() -> None:
    from providers.types import ToolCall

    messages = [
        *_turns(3, 3000),
        Message(role="user", content="weather?"),
        Message(role="assistant", tool_calls=[ToolCall("c1", "weather", '{"city": "Oslo"}')]),
        Message(role="tool", tool_call_id="c1", name="weather", content="sunny"),
    ]
    cut = fit_messages(messages, 300)
    assert [m.role for m in cut] == ["system", "user", "assistant", "tool"]
