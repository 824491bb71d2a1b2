"""web_search through the real `openai` SDK against a local server that plays Perplexity's
chat-completions API (sources beside `choices`, a `<think>` block in sonar-reasoning answers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from chatfn.runtime.logging import secret_values
from chatfn.runtime.plugins import builtin_status
from chatfn.runtime.settings import parse_settings
from function_calls.builtins.web_search.client import SearchAnswer, Source, sources_of, strip_think
from providers.scripted import ScriptedModel, call, say
from tests.fakes.cassette import Interaction, ReplayServer, openai_chat_response
from tests.function_calls.builtins.conftest import MakeBot

KEY = "pplx-test-key-123"


def perplexity_body(content: str) -> dict[str, Any]:
    """Shaped like a sonar answer: `citations` and `search_results` next to `choices`."""
    body = openai_chat_response(content, model="sonar")
    body["citations"] = ["https://example.org/tdf-2024", "https://news.example.com/pogacar"]
    body["search_results"] = [
        {
            "title": "Tour de France 2024 results",
            "url": "https://example.org/tdf-2024",
            "date": "2024-07-21",
        },
        {"title": "Pogačar wins his third Tour", "url": "https://news.example.com/pogacar"},
    ]
    body["usage"]["search_context_size"] = "low"
    return body


@pytest.fixture
async def search_server() -> AsyncIterator[ReplayServer]:
    async with ReplayServer() as srv:
        yield srv


def config(server: ReplayServer, **extra: Any) -> dict[str, Any]:
    return {
        "web_search": {"api_key": KEY, "base_url": f"{server.url}/v1", **extra},
        "bot": {"admins": ["root"]},
    }


async def test_answer_with_sources_and_no_thinking(
    make_bot: MakeBot, search_server: ReplayServer
) -> None:
    search_server.queue.append(
        Interaction(
            None,
            "",
            200,
            json_body=perplexity_body(
                "<think>The user asks about 2024. Let me check.</think>\nTadej Pogačar won [1][2]."
            ),
        )
    )
    tb, _ = await make_bot(config=config(search_server))
    [reply] = await tb.send("/web_search who won the 2024 Tour de France?", sender="bob")
    assert reply == (
        "Tadej Pogačar won [1][2].\n\nSources:\n"
        "[1] Tour de France 2024 results — https://example.org/tdf-2024\n"
        "[2] Pogačar wins his third Tour — https://news.example.com/pogacar"
    )
    [request] = search_server.received
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "sonar"
    assert request.body["messages"][-1] == {
        "role": "user",
        "content": "who won the 2024 Tour de France?",
    }


async def test_model_calls_it_and_user_gets_the_links(
    make_bot: MakeBot, search_server: ReplayServer
) -> None:
    search_server.queue.append(
        Interaction(None, "", 200, json_body=perplexity_body("Pogačar [1]."))
    )
    model = ScriptedModel([call("web_search", query="Tour de France 2024 winner")])
    tb, _ = await make_bot(config=config(search_server), model=model)
    [reply] = await tb.send("who won the tour this year?", sender="bob")
    assert "https://example.org/tdf-2024" in reply
    assert len(model.requests) == 1  # the function's answer ends the turn


async def test_not_offered_without_a_key(make_bot: MakeBot) -> None:
    model = ScriptedModel([call("help")])
    tb, _ = await make_bot(model=model)
    assert "web_search" not in tb.bot.registry
    await tb.send("search the web for cats", sender="bob")
    assert "web_search" not in {t.name for t in model.requests[0].tools}
    rows = {name: (state, reason) for name, state, reason in builtin_status(tb.settings)}
    assert rows["web_search"][0] == "missing key"
    assert "web_search.api_key" in rows["web_search"][1]


async def test_allowed_groups_and_users(make_bot: MakeBot, search_server: ReplayServer) -> None:
    tb, _ = await make_bot(
        config=config(search_server, allowed_groups=["g-ok"], allowed_users=["vip"])
    )
    [refused] = await tb.send("/web_search cats", sender="bob", group="g-other")
    assert refused == (
        "web search is not enabled for this group (ask an admin to add it to web_search config)."
    )
    [refused] = await tb.send("/web_search cats", sender="bob")
    assert "not enabled for you" in refused
    assert search_server.received == []
    for sender, group in (("bob", "g-ok"), ("vip", None), ("root", "g-other")):
        search_server.queue.append(
            Interaction(None, "", 200, json_body=perplexity_body("Cats [1]."))
        )
        [reply] = await tb.send("/web_search cats", sender=sender, group=group)
        assert reply.startswith("Cats [1].")
    assert len(search_server.received) == 3


async def test_model_is_not_offered_web_search_where_not_allowed(
    make_bot: MakeBot, search_server: ReplayServer
) -> None:
    model = ScriptedModel([say("no search"), call("web_search", query="cats"), say("refused")])
    tb, _ = await make_bot(config=config(search_server, allowed_groups=["g-ok"]), model=model)
    await tb.send("search cats", sender="bob", group="g-other", at_bot=True)
    assert "web_search" not in {t.name for t in model.requests[0].tools}
    # Asked for anyway (prompt injection): refused in code, the search API never called.
    assert await tb.send("search cats!", sender="bob", group="g-other", at_bot=True) == ["refused"]
    tool_result = [m for m in model.requests[2].messages if m.role == "tool"][0]
    assert tool_result.is_error and "not enabled for this group" in tool_result.content
    assert search_server.received == []


async def test_errors_become_short_messages(make_bot: MakeBot, search_server: ReplayServer) -> None:
    search_server.queue.append(
        lambda _r: web.json_response(
            {"error": {"message": "invalid key", "type": "invalid_request_error"}}, status=401
        )
    )
    tb, _ = await make_bot(config=config(search_server))
    [reply] = await tb.send("/web_search cats", sender="bob")
    assert reply.startswith(
        "Web search failed: the search service rejected the API key (401); "
        "check web_search.api_key."
    )
    assert KEY not in reply


def test_openai_search_models_annotations_and_plain_citations() -> None:
    body = openai_chat_response("Answer.", model="gpt-4o-search-preview")
    body["choices"][0]["message"]["annotations"] = [
        {
            "type": "url_citation",
            "url_citation": {
                "url": "https://a.example/",
                "title": "A",
                "start_index": 0,
                "end_index": 6,
            },
        },
        {"type": "url_citation", "url_citation": {"url": "https://a.example/", "title": "A"}},
    ]
    assert sources_of(body) == [Source("https://a.example/", "A")]
    plain = {"choices": [{"message": {"content": "x"}}], "citations": ["https://b.example/p"]}
    assert SearchAnswer("x", sources_of(plain)).render() == "x\n\nSources:\n[1] https://b.example/p"


@pytest.mark.parametrize(
    "raw,clean",
    [
        ("<think>a\nb</think>\n\nAnswer", "Answer"),
        ("<THINK>x</THINK>Answer <think>y</think>more", "Answer more"),
        ("<think>cut off before the answer", ""),
        ("No thinking", "No thinking"),
    ],
)
def test_strip_think(raw: str, clean: str) -> None:
    assert strip_think(raw) == clean


def test_key_is_masked_in_logs() -> None:
    assert KEY in secret_values(parse_settings({"web_search": {"api_key": KEY}}))
