"""The whole pipeline on the real `openai` SDK against a local OpenAI-compatible server:
recorded responses replayed, and scripted outages."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from chatfn.testing import TestBot
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.config import ModelConfig
from providers.factory import build_model
from tests.fakes.cassette import ReplayServer, load_cassette, openai_chat_response


def model_for(server: ReplayServer, **extra: object):  # type: ignore[no-untyped-def]
    cfg = ModelConfig(
        provider="openai",
        model="gpt-4o",
        api_key="sk-test",  # type: ignore[arg-type]
        base_url=f"{server.url}/v1",
        native_tools=True,
        max_retries=0,
        **extra,
    )
    return build_model("default", cfg)


async def test_recorded_tool_round_trip(tmp_path: Path, server: ReplayServer) -> None:
    """openai/test_openai_tool_output.yaml: the model calls get_user_country, gets our result,
    then answers by calling final_result: both run through our executor."""
    reg = Registry()
    seen: dict[str, str] = {}
    with reg.collecting():

        @tool_function(name="get_user_country", description="The user's country.")
        def get_user_country(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(llm_content="Mexico")

        from pydantic import BaseModel

        class Final(BaseModel):
            city: str
            country: str

        @tool_function(name="final_result", description="The final answer.")
        def final_result(ctx: MessageContext, args: Final) -> FunctionResult:
            seen.update(args.model_dump())
            return FunctionResult(messages=[f"{args.city}, {args.country}"])

    server.queue.extend(load_cassette("openai/test_openai_tool_output.yaml"))
    tb = TestBot(tmp_path, model=model_for(server), registry=reg, builtins=False)
    replies = await tb.send("What is the largest city in the user country?")
    assert replies == ["Mexico City, Mexico"]
    assert seen == {"city": "Mexico City", "country": "Mexico"}
    first, second = server.bodies()
    assert {t["function"]["name"] for t in first["tools"]} == {"get_user_country", "final_result"}
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1]["role"] == "user"
    assert first["messages"][-1]["content"].startswith("<context>Current time: ")
    assert first["messages"][-1]["content"].endswith(
        "</context>\nWhat is the largest city in the user country?"
    )
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "call_iXFttys57ap0o16JSlC8yhYo"
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_iXFttys57ap0o16JSlC8yhYo",
        "content": "Mexico",
    }
    await tb.aclose()


async def test_500_gives_short_message_and_history_keeps_question(
    tmp_path: Path, server: ReplayServer
) -> None:
    server.queue.append(lambda _r: web.json_response({"error": {"message": "boom"}}, status=500))
    tb = TestBot(tmp_path, model=model_for(server))
    replies = await tb.send("Are you there?")
    assert replies == [
        "Sorry, the model is not available right now. Your message is saved; "
        "please try again in a moment."
    ]
    rows = tb.bot.storage.recent_messages("test", "private:alice", 10)
    assert [(r.role, r.text) for r in rows] == [("user", "Are you there?"), ("notice", replies[0])]
    # The next message still sees the unanswered question in its history.
    server.queue.append(lambda _r: web.json_response(openai_chat_response("Yes, I'm here.")))
    assert await tb.send("hello again") == ["Yes, I'm here."]
    contents = [m.get("content") for m in server.bodies()[-1]["messages"]]
    assert "Are you there?" in contents and contents[-1].endswith("</context>\nhello again")
    # The outage notice is not shown to the model as something it said.
    assert not any("not available" in (c or "") for c in contents)
    await tb.aclose()


async def test_provider_timeout(tmp_path: Path, server: ReplayServer) -> None:
    gave_up = asyncio.Event()

    async def hang(_r):  # type: ignore[no-untyped-def]
        await gave_up.wait()  # the answer comes only once the turn has stopped waiting
        return web.json_response(openai_chat_response("late"))

    server.queue.append(hang)
    tb = TestBot(tmp_path, model=model_for(server, timeout=0.3))
    replies = await tb.send("slow?")
    gave_up.set()
    assert replies == [
        "Sorry, the model took too long to answer. Your message is saved; "
        "please try again in a moment."
    ]
    assert tb.bot.storage.recent_messages("test", "private:alice", 5)[0].text == "slow?"
    await tb.aclose()


async def test_chat_fallback_sends_current_message_once_with_history(
    tmp_path: Path, server: ReplayServer
) -> None:
    server.queue.extend(
        [
            lambda _r: web.json_response(openai_chat_response("Hi Alice")),
            lambda _r: web.json_response(openai_chat_response("You said hi")),
        ]
    )
    tb = TestBot(
        tmp_path,
        model=model_for(server),
        builtins=False,
        config={"bot": {"system_prompt": "You are {bot_name}.", "name": "Testy"}},
        clock=lambda: 1_800_000_000.0,  # 2027-01-15 08:00 UTC
    )
    await tb.send("hi")
    await tb.send("what did I say?")
    body = server.bodies()[-1]
    assert "tools" not in body  # no functions registered: plain chat
    msgs = body["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("You are Testy.")
    # The time is not in the system prompt (it would break the cached prefix every minute):
    # it opens the newest message, with who sent it; history rows carry no note.
    assert "Current time:" not in msgs[0]["content"]
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "hi"),
        ("assistant", "Hi Alice"),
        (
            "user",
            "<context>Current time: 2027-01-15 08:00 (Friday), time zone UTC (UTC+0000). "
            "From: alice.</context>\nwhat did I say?",
        ),
    ]
    await tb.aclose()


async def test_history_window_starts_at_a_user_turn(tmp_path: Path, server: ReplayServer) -> None:
    for text in ["a", "b", "c"]:
        server.queue.append(lambda _r, t=text: web.json_response(openai_chat_response(t.upper())))
    tb = TestBot(
        tmp_path, model=model_for(server), builtins=False, config={"bot": {"history_size": 3}}
    )
    for text in ["a", "b", "c"]:
        await tb.send(text)
    msgs = server.bodies()[-1]["messages"][1:]
    # The last 3 stored rows before "c" are A(assistant), b, B: the window drops the leading
    # assistant reply rather than show an answer without its question.
    assert [(m["role"], m["content"].split("</context>\n")[-1]) for m in msgs] == [
        ("user", "b"),
        ("assistant", "B"),
        ("user", "c"),
    ]
    await tb.aclose()


async def test_turn_note_uses_configured_time_zone(tmp_path: Path, server: ReplayServer) -> None:
    server.queue.append(lambda _r: web.json_response(openai_chat_response("ok")))
    tb = TestBot(
        tmp_path,
        model=model_for(server),
        builtins=False,
        config={"reminders": {"timezone": "Asia/Kathmandu"}},
    )
    await tb.send("what time is it?")
    newest = server.bodies()[0]["messages"][-1]["content"]
    assert "(UTC+0545)" in newest
    await tb.aclose()
