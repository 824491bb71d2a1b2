"""Every model request a function makes goes through one door (function_calls/model_access.py)
and is counted like the chat's own turns: usage row, metrics, /stats, the day's call and token
limits per user and per chat. Real bots on real SQLite files, scripted models, the web_search
built-in against a local server speaking Perplexity's API."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatfn.testing import TestBot
from function_calls import FunctionResult, MessageContext, limits, tool_function
from function_calls.registry import Registry
from providers.base import UnaccountedRequest
from providers.scripted import ScriptedModel, call, say
from providers.types import Message
from tests.fakes.cassette import Interaction, ReplayServer
from tests.function_calls.builtins.test_web_search import KEY, perplexity_body

NOON = datetime(2030, 1, 1, 12, 0, 10, tzinfo=UTC)
GROUP = "team1"


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "clock", lambda: NOON)


def _history(tb: TestBot, n: int = 6) -> None:
    for i in range(n):
        tb.bot.storage.add_message(
            platform="test",
            chat_id=GROUP,
            role="user",
            sender_id=f"u{i % 2}",
            sender_name=f"user{i % 2}",
            text=f"message {i} about the release",
            is_group=True,
        )


def _limits(per_user: dict[str, Any] | None = None, per_chat: dict[str, Any] | None = None):
    return {
        "bot": {"timezone": "UTC"},
        "limits": {"per_user": per_user or {}, "per_chat": per_chat or {}},
    }


async def test_summary_as_a_command_is_a_model_call_the_limits_count(tmp_path: Path) -> None:
    """The probe: model_calls_per_day 5, one member sends /summary 8 times: 5 model requests,
    then the limit's sentence once, then silence."""
    model = ScriptedModel([say(f"• point {i}") for i in range(5)])
    config = _limits({"model_calls_per_day": 5})
    tb = TestBot(tmp_path, model=model, config=config)
    await tb.start()
    try:
        _history(tb)
        replies = [await tb.send("/summary", sender="bob", group=GROUP) for _ in range(8)]
        usage = tb.bot.storage.chat_state.usage_rows(GROUP)
        body, _ = tb.bot.metrics.render()
    finally:
        await tb.aclose()
    assert len(model.requests) == 5
    assert all(r[0].endswith(f"• point {i}") for i, r in enumerate(replies[:5]))
    assert replies[5] == [
        "You have reached the limit of 5 model calls per day; it resets at 00:00 tomorrow."
    ]
    assert replies[6:] == [[], []]  # told once per window
    assert [(u.sender_id, u.model_name, u.outcome) for u in usage] == [
        ("bob", "scripted", "ok")
    ] * 5
    text = body.decode()
    assert 'chatfn_model_requests_total{model="scripted",outcome="ok"} 5.0' in text
    assert 'chatfn_limit_refusals_total{limit="per_user.model_calls_per_day"} 3.0' in text


async def test_a_command_that_asks_a_model_is_a_message_the_minute_counts(
    tmp_path: Path, search_server: ReplayServer
) -> None:
    """Issue 34, item 5: /summary and /web_search sent 8 times a minute under
    messages_per_minute 6 made 8 model requests each (a command's request did not count as a
    message). A message that makes a model request reaches the model, whatever its path:
    6 requests, the limit's sentence once, then silence; the search server is asked 6 times."""
    for _ in range(8):
        search_server.queue.append(
            Interaction(None, "", 200, json_body=perplexity_body("Pogačar [1]."))
        )
    model = ScriptedModel([say("• a point")], repeat_last=True)
    config = _limits({"messages_per_minute": 6})
    config["web_search"] = {"api_key": KEY, "base_url": f"{search_server.url}/v1"}
    tb = TestBot(tmp_path, model=model, config=config)
    try:
        _history(tb)
        summaries = [await tb.send("/summary", sender="bob", group=GROUP) for _ in range(8)]
        searches = [await tb.send("/web_search tour winner", sender="ann") for _ in range(8)]
        body, _ = tb.bot.metrics.render()
    finally:
        await tb.aclose()
    assert len(model.requests) == 6
    assert len(search_server.received) == 6
    minute = "You have reached the limit of 6 messages per minute; it resets at 12:01."
    for replies in (summaries, searches):
        assert all(r and r[0] != minute for r in replies[:6])
        assert replies[6:] == [[minute], []]  # told once per window
    assert 'chatfn_limit_refusals_total{limit="per_user.messages_per_minute"} 4.0' in (
        body.decode()
    )


async def test_a_chat_limit_counts_every_member_s_summaries(tmp_path: Path) -> None:
    model = ScriptedModel([say("• one"), say("• two")])
    tb = TestBot(tmp_path, model=model, config=_limits(per_chat={"model_calls_per_day": 2}))
    try:
        _history(tb)
        assert (await tb.send("/summary", sender="ann", group=GROUP))[0].endswith("• one")
        assert (await tb.send("/summary", sender="bob", group=GROUP))[0].endswith("• two")
        assert await tb.send("/summary", sender="cid", group=GROUP) == [
            "This chat has reached the limit of 2 model calls per day; it resets at 00:00 tomorrow."
        ]
    finally:
        await tb.aclose()
    assert len(model.requests) == 2


class AskArgs(BaseModel):
    times: int = 1


def _plugin_registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Ask the model through the door.")
        async def polite(ctx: MessageContext, args: AskArgs) -> FunctionResult:
            answers = [
                (await ctx.ask_model("say hi", system="be brief")).content or ""
                for _ in range(args.times)
            ]
            return FunctionResult(messages=[" / ".join(answers)])

        @tool_function(description="Ask the model around the door.")
        async def sneaky(ctx: MessageContext) -> FunctionResult:
            assert ctx.model is not None
            answer = await ctx.model.complete([Message(role="user", content="free lunch?")])
            return FunctionResult(messages=[answer.content or ""])

        @tool_function(description="Stream from the model around the door.")
        async def sneaky_stream(ctx: MessageContext) -> FunctionResult:
            assert ctx.model is not None
            async for _event in ctx.model.stream([Message(role="user", content="free?")]):
                pass
            return FunctionResult(messages=["streamed"])

    return registry


async def test_a_plugin_asks_through_the_door_and_only_through_it(tmp_path: Path) -> None:
    """A plugin's requests through ctx.ask_model are counted (usage row, tokens, /stats), its
    message once against messages_per_minute however many requests it makes (the three
    /polite messages fit in 3 a minute, their four requests would not), and they stop at the
    day's limit; one made on the model object itself reaches nothing (nor counts)."""
    model = ScriptedModel([say("hi 1"), say("hi 2"), say("hi 3")])
    config = _limits({"messages_per_minute": 3, "model_calls_per_day": 9, "tokens_per_day": 40})
    tb = TestBot(tmp_path, model=model, config=config, registry=_plugin_registry())
    try:
        assert await tb.send("/polite times=2", sender="bob") == ["hi 1 / hi 2"]
        [refused] = await tb.send("/sneaky", sender="bob")
        [refused_stream] = await tb.send("/sneaky_stream", sender="bob")
        # 2 calls, 30 tokens so far: the third call is under both limits, then tokens are over.
        assert await tb.send("/polite", sender="bob") == ["hi 3"]
        assert await tb.send("/polite", sender="bob") == [
            "You have reached the limit of 40 tokens per day; it resets at 00:00 tomorrow."
        ]
        audit = [(r.function, r.outcome) for r in tb.bot.storage.tool_calls()]
        usage = tb.bot.storage.chat_state.usage_rows("private:bob")
        stats = tb.bot.storage.chat_state.stats(
            "test", "private:bob", datetime(2000, 1, 1, tzinfo=UTC)
        )
    finally:
        await tb.aclose()
    assert len(model.requests) == 3  # neither sneaky call reached the model
    assert model.requests[0].messages[0] == Message(role="system", content="be brief")
    assert "sneaky failed" in refused or "failed" in refused
    assert "failed" in refused_stream
    assert audit == [
        ("polite", "ok"),
        ("sneaky", "error"),
        ("sneaky_stream", "error"),
        ("polite", "ok"),
        ("polite", "refused"),
    ]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(10, 5)] * 3
    assert (stats.model_calls, stats.tokens) == (3, 45)  # what /stats shows for the chat


async def test_a_message_s_concurrent_requests_count_it_once(tmp_path: Path) -> None:
    """A function that asks twice at once counts its message once (messages_per_minute 1):
    both answers come; the next such message in the minute is refused before it asks."""
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Ask the model twice at once.")
        async def twice(ctx: MessageContext) -> FunctionResult:
            answers = await asyncio.gather(ctx.ask_model("one?"), ctx.ask_model("two?"))
            return FunctionResult(messages=[" / ".join(a.content or "" for a in answers)])

    model = ScriptedModel([say("a"), say("b")])
    tb = TestBot(
        tmp_path, model=model, config=_limits({"messages_per_minute": 1}), registry=registry
    )
    try:
        [both] = await tb.send("/twice", sender="bob")
        again = await tb.send("/twice", sender="bob")
    finally:
        await tb.aclose()
    assert sorted(both.split(" / ")) == ["a", "b"]
    assert again == ["You have reached the limit of 1 messages per minute; it resets at 12:01."]
    assert len(model.requests) == 2


async def test_a_turn_s_own_tool_request_does_not_count_its_message_again(
    tmp_path: Path, search_server: ReplayServer
) -> None:
    """The model's turn counted its message; the web_search it calls is a request of the same
    message (messages_per_minute 1 lets it through), and the next message is refused."""
    search_server.queue.append(
        Interaction(None, "", 200, json_body=perplexity_body("Pogačar [1]."))
    )
    config = _limits({"messages_per_minute": 1})
    config["web_search"] = {"api_key": KEY, "base_url": f"{search_server.url}/v1"}
    model = ScriptedModel([call("web_search", query="Tour de France 2024 winner")])
    tb = TestBot(tmp_path, model=model, config=config)
    try:
        [answer] = await tb.send("who won the tour?", sender="bob")
        refused = await tb.send("and the giro?", sender="bob")
    finally:
        await tb.aclose()
    assert "Pogačar" in answer
    assert len(search_server.received) == 1
    assert refused == ["You have reached the limit of 1 messages per minute; it resets at 12:01."]


async def test_unaccounted_request_is_refused_before_it_leaves(tmp_path: Path) -> None:
    model = ScriptedModel([say("never")])
    tb = TestBot(tmp_path, model=model)
    try:
        with pytest.raises(UnaccountedRequest, match="ctx.ask_model"):
            await model.complete([Message(role="user", content="hi")])
    finally:
        await tb.aclose()
    assert model.requests == []
    # A model nobody serves (a provider test's own) is not guarded.
    free = ScriptedModel([say("fine")])
    assert (await free.complete([Message(role="user", content="hi")])).content == "fine"


@pytest.fixture
async def search_server():
    async with ReplayServer() as srv:
        yield srv


async def test_web_search_is_on_record_and_limited(
    tmp_path: Path, search_server: ReplayServer
) -> None:
    for _ in range(2):
        search_server.queue.append(
            Interaction(None, "", 200, json_body=perplexity_body("Pogačar [1]."))
        )
    config = _limits({"model_calls_per_day": 2})
    config["web_search"] = {"api_key": KEY, "base_url": f"{search_server.url}/v1"}
    model = ScriptedModel([call("web_search", query="Tour de France 2024 winner")])
    tb = TestBot(tmp_path, model=model, config=config)
    try:
        # The model's turn (1 call) and its web_search (1 call): the day's 2.
        [answer] = await tb.send("who won the tour?", sender="bob")
        assert "Pogačar" in answer
        [refused] = await tb.send("/web_search who won the giro?", sender="bob")
        usage = tb.bot.storage.chat_state.usage_rows("private:bob")
        body, _ = tb.bot.metrics.render()
    finally:
        await tb.aclose()
    assert refused == (
        "You have reached the limit of 2 model calls per day; it resets at 00:00 tomorrow."
    )
    assert len(search_server.received) == 1  # the refused search was never sent
    assert [(u.model_name, u.model_id, u.prompt_tokens, u.completion_tokens) for u in usage] == [
        ("scripted", "scripted", 10, 5),
        ("web_search", "sonar", 10, 5),
    ]
    text = body.decode()
    assert 'chatfn_model_requests_total{model="web_search",outcome="ok"} 1.0' in text
    assert 'chatfn_model_tokens_total{kind="prompt",model="web_search"} 10.0' in text
