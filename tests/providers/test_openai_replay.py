"""The real `openai` SDK, through our adapter, against recorded OpenAI / DeepSeek / compatible
traffic: what the adapter made of each recorded response, and that the next request it sent is
the one the real client sent (tool results with their ids, reasoning_content, generated ids)."""

from __future__ import annotations

from typing import Any

import pytest

from providers.types import LLMResponse, StreamEvent
from tests.fakes.cassette import ReplayServer
from tests.providers.helpers import (
    chat_interactions,
    make_model,
    messages_from_wire,
    normalize,
    run,
    tools_from_wire,
)

CASSETTES = {
    # cassette: streamed?
    "openai/test_compatible_api_with_tool_calls_without_id.yaml": False,
    "openai/test_multiple_agent_tool_calls.yaml": False,
    "openai/test_openai_instructions_with_tool_calls_keep_instructions.yaml": False,
    "openai/test_openai_tool_output.yaml": False,
    "openai/tool_choice_auto.yaml": False,
    "openai/tool_choice_auto_groq_compatible.yaml": False,
    "openai/test_complex_agent_run_stream_parallel.yaml": True,
    "openai/test_run_stream_sync_streams_real_model.yaml": True,
    "deepseek/test_deepseek_deferred_capability_with_thinking.yaml": False,
    "deepseek/test_deepseek_model_thinking_part.yaml": False,
    "deepseek/test_deepseek_model_thinking_stream.yaml": True,
}


async def replay(
    server: ReplayServer, cassette: str, stream: bool
) -> tuple[list[LLMResponse], list[list[StreamEvent]], list[dict[str, Any]]]:
    """Hold the recorded conversation through our adapter, request by request.

    History for request k+1 = what we sent for request k + our parse of response k + whatever
    the recorded client appended after it (tool results, injected turns), with recorded call ids
    renamed to ours. Every request we send must equal the recorded one, modulo null values and
    that renaming. Returns the responses, stream events, and our request bodies.
    """
    interactions = chat_interactions(cassette)
    server.queue = list(interactions)
    first = interactions[0].request_body
    model = make_model(server, first["model"])
    history = messages_from_wire(first["messages"])
    idmap: dict[str, str] = {}
    responses: list[LLMResponse] = []
    all_events: list[list[StreamEvent]] = []
    for k, interaction in enumerate(interactions):
        recorded = interaction.request_body
        if k:
            ours = responses[-1].as_message()
            recorded_turn = recorded["messages"][len(history)]
            assert recorded_turn["role"] == "assistant"
            for rec_call, our_call in zip(
                recorded_turn.get("tool_calls") or [], ours.tool_calls, strict=True
            ):
                idmap[rec_call["id"]] = our_call.id
            extra = recorded["messages"][len(history) + 1 :]
            history = [*history, ours, *messages_from_wire(extra, idmap)]
        response, events = await run(model, history, tools_from_wire(recorded), stream)
        responses.append(response)
        all_events.append(events)
        sent = server.received[k].body
        assert normalize(sent["messages"]) == normalize(recorded["messages"], idmap)
        assert sent.get("tools", []) == [
            {
                "type": "function",
                "function": {k2: t["function"][k2] for k2 in ("name", "description", "parameters")},
            }
            for t in recorded.get("tools", [])
        ]
        assert sent["model"] == recorded["model"]
        assert sent.get("stream", False) == recorded.get("stream", False)
        assert sent.get("stream_options") == recorded.get("stream_options")
    assert not server.queue, "the adapter made fewer requests than the recording"
    await model.aclose()
    return responses, all_events, server.bodies()


@pytest.mark.parametrize("cassette", sorted(CASSETTES))
async def test_conversation_replays_exactly(server: ReplayServer, cassette: str) -> None:
    responses, _, _ = await replay(server, cassette, CASSETTES[cassette])
    last = responses[-1]
    # Every recording ends in an answer: text, or a `final_result` call (pydantic-ai's output tool).
    assert last.content or [c.name for c in last.tool_calls] == ["final_result"]
    assert last.finish_reason == ("stop" if last.content else "tool_calls")
    assert responses[-1].usage is not None and responses[-1].usage.output_tokens > 0


async def test_tool_output_calls_and_usage(server: ReplayServer) -> None:
    (first, second), _, bodies = await replay(server, "openai/test_openai_tool_output.yaml", False)
    assert first.content is None and first.finish_reason == "tool_calls"
    [call] = first.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_iXFttys57ap0o16JSlC8yhYo",
        "get_user_country",
        "{}",
    )
    assert (first.usage.input_tokens, first.usage.output_tokens) == (68, 12)
    assert first.model == "gpt-4o-2024-08-06"
    assert bodies[1]["messages"][2] == {
        "role": "tool",
        "content": "Mexico",
        "tool_call_id": "call_iXFttys57ap0o16JSlC8yhYo",
    }
    [final] = second.tool_calls
    assert final.parsed_arguments() == {"city": "Mexico City", "country": "Mexico"}


async def test_calls_without_ids_get_consistent_generated_ids(server: ReplayServer) -> None:
    (first, second), _, bodies = await replay(
        server, "openai/test_compatible_api_with_tool_calls_without_id.yaml", False
    )
    [call] = first.tool_calls
    assert call.id.startswith("call_") and len(call.id) > 10  # the server sent id ""
    assert call.name == "get_current_time"
    sent = bodies[1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.id
    assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "Noon"}
    assert second.content == "The current time is Noon."


async def test_groq_short_ids_and_missing_content(server: ReplayServer) -> None:
    (first, second), _, bodies = await replay(
        server, "openai/tool_choice_auto_groq_compatible.yaml", False
    )
    assert first.tool_calls[0].id == "48f5r72yf" and first.content is None
    assert bodies[1]["messages"][2]["tool_call_id"] == "48f5r72yf"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (774, 15)


async def test_deepseek_reasoning_becomes_thinking_and_is_replayed(server: ReplayServer) -> None:
    responses, _, bodies = await replay(
        server, "deepseek/test_deepseek_deferred_capability_with_thinking.yaml", False
    )
    first, second, third = responses
    [block] = first.thinking
    assert block.provider == "deepseek" and block.text.startswith("The user wants to play")
    assert first.content == "Let me load the dice rolling capability!"
    assert first.tool_calls[0].id == "call_00_sXqYgMESDht75NCLLZtt9804"
    assert [c.name for c in second.tool_calls] == ["get_player_name", "roll_dice"]
    assert third.thinking[0].text.startswith("The player's name is Anne")
    # Request 3 carries reasoning_content on every tool-call turn since the user's message,
    # "" on the one that had none (the recorded client did the same).
    assistant_turns = [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"][:20] for m in assistant_turns] == [
        "The user wants to pl",
        "",
        "Great, now I have ac",
    ]


async def test_deepseek_thinking_without_tools(server: ReplayServer) -> None:
    [response], _, bodies = await replay(
        server, "deepseek/test_deepseek_model_thinking_part.yaml", False
    )
    assert response.thinking[0].text.startswith("Okay, the user is asking how to cross")
    assert response.content.startswith("Crossing the street safely")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 789)
    assert "tools" not in bodies[0]


async def test_earlier_turn_history_has_no_reasoning_content(server: ReplayServer) -> None:
    # test_multiple_agent_tool_calls starts with a finished earlier turn (a call, its result, an
    # answer) before the new user message: no reasoning field anywhere.
    responses, _, bodies = await replay(server, "openai/test_multiple_agent_tool_calls.yaml", False)
    assert responses[0].tool_calls[0].parsed_arguments() == {"country": "England"}
    assert all("reasoning_content" not in m for b in bodies for m in b["messages"])


async def test_stream_parallel_calls_by_index(server: ReplayServer) -> None:
    responses, events, _ = await replay(
        server, "openai/test_complex_agent_run_stream_parallel.yaml", True
    )
    first = responses[0]
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
        ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", "{}"),
    ]
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (364, 40)
    kinds = [(e.type, e.index) for e in events[0] if e.type.startswith("tool_call")]
    assert kinds == [
        ("tool_call_start", 0),
        ("tool_call_delta", 0),
        ("tool_call_start", 1),
        ("tool_call_delta", 1),
        ("tool_call_end", 0),
        ("tool_call_end", 1),
    ]
    ends = [e.tool_call for e in events[0] if e.type == "tool_call_end"]
    assert ends == first.tool_calls
    assert responses[1].tool_calls[0].parsed_arguments() == {"city": "Mexico City"}
    deltas = "".join(e.text for e in events[1] if e.type == "tool_call_delta")
    assert deltas == responses[1].tool_calls[0].arguments
    assert responses[2].tool_calls[0].name == "final_result"


async def test_stream_text_after_tool_call(server: ReplayServer) -> None:
    responses, events, _ = await replay(
        server, "openai/test_run_stream_sync_streams_real_model.yaml", True
    )
    assert responses[0].tool_calls[0].parsed_arguments() == {"country": "UK"}
    text = [e.text for e in events[1] if e.type == "text"]
    assert len(text) > 3 and "".join(text) == responses[1].content
    assert "London" in responses[1].content


async def test_deepseek_stream_thinking(server: ReplayServer) -> None:
    [response], [events], _ = await replay(
        server, "deepseek/test_deepseek_model_thinking_stream.yaml", True
    )
    thinking = "".join(e.text for e in events if e.type == "thinking")
    assert thinking.startswith("Hmm, the user just") or thinking.startswith("Hmm")
    assert response.thinking[0].text == thinking
    assert response.thinking[0].provider == "deepseek"
    first_text = next(i for i, e in enumerate(events) if e.type == "text")
    assert all(e.type != "thinking" for e in events[first_text:])
    assert (response.usage.input_tokens, response.usage.output_tokens) == (6, 212)
    assert response.finish_reason == "stop" and response.content
