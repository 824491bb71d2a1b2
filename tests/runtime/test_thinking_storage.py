"""Thinking is stored with the reply it led to, logged at debug level, never sent to the chat,
never fed back to a model from history, and old databases get the new column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from loguru import logger

from chatfn.runtime.settings import ConfigError, parse_settings
from chatfn.storage.db import Storage
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, call, say
from providers.types import LLMResponse, ThinkingBlock
from tests.runtime.functions import make_registry


def thinking(step: LLMResponse, *texts: str) -> LLMResponse:
    step.thinking = [ThinkingBlock(text=t, provider="scripted") for t in texts]
    return step


def rows(tb: TestBot, chat: str = "private:alice") -> list[tuple[str, str, str | None]]:
    storage = tb.bot.storage
    return [
        (r.role, r.text, storage.thinking_of(r.id))
        for r in storage.recent_messages("test", chat, 50)
    ]


async def test_tool_loop_thinking_is_stored_on_the_reply_row(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            thinking(call("weather", city="Oslo"), "I need the weather."),
            thinking(say("Sunny in Oslo."), "It is sunny; say so."),
            say("You asked about Oslo."),
        ]
    )
    tb = TestBot(tmp_path, model=model, registry=make_registry(), builtins=False)
    debug: list[str] = []
    sink = logger.add(lambda m: debug.append(m.record["message"]), level="DEBUG")
    try:
        assert await tb.send("weather in Oslo?") == ["Sunny in Oslo."]
        assert await tb.send("what did I ask?") == ["You asked about Oslo."]
    finally:
        logger.remove(sink)
    assert rows(tb) == [
        ("user", "weather in Oslo?", None),
        ("assistant", "Sunny in Oslo.", "I need the weather.\n\nIt is sunny; say so."),
        ("user", "what did I ask?", None),
        ("assistant", "You asked about Oslo.", None),
    ]
    assert "thinking: I need the weather." in debug
    # History gives the model the reply, never the stored reasoning.
    history = model.requests[-1].messages
    assert [m.content for m in history if m.role == "assistant"] == ["Sunny in Oslo."]
    assert all(not m.thinking for m in history)
    await tb.aclose()


async def test_thinking_goes_with_the_function_message_that_ends_the_turn(tmp_path: Path) -> None:
    model = ScriptedModel([thinking(call("note_add", city="milk"), "Save it.")])
    tb = TestBot(tmp_path, model=model, registry=make_registry(), builtins=False)
    assert await tb.send("note milk") == ["Noted: milk"]
    assert rows(tb)[-1] == ("assistant", "Noted: milk", "Save it.")
    await tb.aclose()


async def test_chat_fallback_stores_thinking(tmp_path: Path) -> None:
    model = ScriptedModel([thinking(say("Hello!"), "A greeting.")])
    tb = TestBot(tmp_path, model=model, builtins=False)  # no functions: plain chat
    assert await tb.send("hi") == ["Hello!"]
    assert rows(tb)[-1] == ("assistant", "Hello!", "A greeting.")
    await tb.aclose()


def test_old_database_gets_the_thinking_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the messages table as the first release made it
        conn.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, platform VARCHAR(32) "
            "NOT NULL, chat_id VARCHAR(128) NOT NULL, is_group BOOLEAN NOT NULL, role "
            "VARCHAR(16) NOT NULL, sender_id VARCHAR(128) NOT NULL, sender_name VARCHAR(128) "
            "NOT NULL, text TEXT NOT NULL, message_id VARCHAR(128) NOT NULL, created_at "
            "DATETIME NOT NULL)"
        )
        conn.execute(
            "INSERT INTO messages VALUES (1, 'p', 'c', 0, 'user', 'u', '', 'old', '', "
            "'2024-01-01 00:00:00')"
        )
    storage = Storage(f"sqlite:///{path}")
    storage.create_tables()
    storage.create_tables()  # idempotent
    row = storage.add_message(
        platform="p", chat_id="c", role="assistant", sender_id="bot", text="new", thinking="why"
    )
    assert [m.text for m in storage.recent_messages("p", "c", 5)] == ["old", "new"]
    assert storage.thinking_of(1) is None and storage.thinking_of(row) == "why"
    storage.close()


def test_bot_show_thinking_is_gone_in_favour_of_the_model_setting() -> None:
    with pytest.raises(ConfigError, match="bot.show_thinking: unknown key"):
        parse_settings({"bot": {"show_thinking": True}})
    settings = parse_settings(
        {
            "models": {
                "m": {"model": "x", "api_key": "k", "thinking": {"enabled": True, "show": True}}
            }
        }
    )
    caps = settings.models["m"].capabilities()
    assert caps.thinking and caps.show_thinking
