"""Request layout per provider, for prompt caching: what comes first, where the Anthropic cache
breakpoints are, and OpenAI's per-chat `prompt_cache_key`."""

from __future__ import annotations

import json
from typing import Any

from providers.anthropic import AnthropicModel
from providers.base import prompt_cache_key
from providers.config import ModelConfig
from providers.gemini import GeminiModel
from providers.openai_compat import OpenAICompatModel
from providers.types import Message, ThinkingBlock, ToolCall, ToolDefinition

TOOLS = [
    ToolDefinition("a", "A.", {"type": "object", "properties": {"x": {"type": "string"}}}),
    ToolDefinition("b", "B.", {"type": "object", "properties": {}}),
]
CONVERSATION = [
    Message("system", "You are a bot. You are in a private chat."),
    Message("user", "hi"),
    Message("assistant", "hello"),
    Message("user", "what now?\n\n[Current time: 2027-01-15 08:00 (Friday). From: al.]"),
]


def marks(value: Any, path: str = "$") -> list[str]:
    """Paths of every block carrying cache_control."""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(path)
        for k, v in value.items():
            found += marks(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += marks(v, f"{path}[{i}]")
    return found


def anthropic() -> AnthropicModel:
    cfg = ModelConfig(provider="anthropic", model="claude-x", api_key="k", base_url="http://x")
    return AnthropicModel("c", cfg)


def test_anthropic_breakpoints_on_tools_system_and_the_last_two_turns() -> None:
    request = anthropic().build_request(CONVERSATION, TOOLS)
    assert marks(request) == [
        "$.messages[1].content[0]",  # the last history turn (the bot's answer)
        "$.messages[2].content[0]",  # the newest turn
        "$.system[0]",
        "$.tools[1]",  # the end of the tool list
    ]
    assert request["system"][0]["text"] == CONVERSATION[0].content
    # The API reads tools, then system, then messages: the static parts come first, and the
    # newest turn (with the time) is the very last block.
    assert request["messages"][-1]["content"][-1]["text"].endswith("From: al.]")


def test_anthropic_breakpoints_skip_thinking_and_stay_within_four() -> None:
    loop = [
        *CONVERSATION,
        Message(
            "assistant",
            None,
            tool_calls=[ToolCall("t1", "a", '{"x": "1"}')],
            thinking=[ThinkingBlock("hm", signature="sig", provider="anthropic")],
        ),
        Message("tool", "done", tool_call_id="t1", name="a"),
    ]
    request = anthropic().build_request(loop, TOOLS)
    found = marks(request)
    assert len(found) == 4  # the API's limit
    assistant = request["messages"][-2]["content"]
    assert assistant[0]["type"] == "thinking" and "cache_control" not in assistant[0]
    assert "cache_control" in assistant[-1] and assistant[-1]["type"] == "tool_use"
    assert "cache_control" in request["messages"][-1]["content"][-1]
    # No tools, no system: fewer marks, never on an absent part.
    assert marks(anthropic().build_request(CONVERSATION[1:2], None)) == ["$.messages[0].content[0]"]


def test_openai_prompt_cache_key_only_where_accepted() -> None:
    official = OpenAICompatModel("o", ModelConfig(provider="openai", model="gpt-4o", api_key="k"))
    compatible = OpenAICompatModel(
        "c", ModelConfig(provider="openai", model="m", api_key="k", base_url="http://vllm:8000")
    )
    token = prompt_cache_key.set("chat-abc")
    try:
        body = official._body(CONVERSATION, TOOLS, stream=False)
        assert body["prompt_cache_key"] == "chat-abc"
        assert "prompt_cache_key" not in compatible._body(CONVERSATION, TOOLS, stream=False)
    finally:
        prompt_cache_key.reset(token)
    assert "prompt_cache_key" not in official._body(CONVERSATION, TOOLS, stream=False)
    # OpenAI renders tools, then the messages in order: the static system message first, the
    # newest turn (with the time) last.
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert body["messages"][-1]["content"].endswith("From: al.]")


def test_gemini_static_system_instruction_time_in_the_newest_turn() -> None:
    cfg = ModelConfig(provider="gemini", model="gemini-2.5-flash", api_key="k")
    contents, config = GeminiModel("g", cfg).build_config(CONVERSATION, TOOLS)
    assert "Current time" not in json.dumps(config.model_dump(mode="json"))
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[-1].parts[-1].text.endswith("From: al.]")
