"""The seeded bot behind the admin console's browser tests (test_admin_pages.py): the real
bot with the HTTP channel and `admin.users`, its SQLite database filled by real traffic
(messages through POST /v1/messages, a scripted model calling a function, a reminder set by
its slash command, outbox rows no channel could deliver)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatfn.channels.http.admin.passwords import hash_password
from chatfn.channels.http.channel import HttpChannel
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.scripted import ScriptedModel
from providers.types import LLMResponse, Message, ToolCall, ToolDefinition, Usage

TOKEN = "admin-pages-token"
PASSWORDS = {"alice": "alice-secret-1", "carol": "carol-secret-1"}
TEAM = "group:team"  # http chat ids, as the web chat page writes them
BOB = "private:bob"
HOSTILE = "<img src=x onerror=window.__pwned=1>"  # a sender's name: must show as text
MALLORY = "private:mallory"


class DiceArgs(BaseModel):
    sides: int


def _registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Roll a die.")
        async def roll_dice(ctx: MessageContext, args: DiceArgs) -> FunctionResult:
            return FunctionResult(llm_content=f"rolled {args.sides}")

    return registry


def _answer(name: str) -> Any:
    """A scripted model's one step, repeated: "roll" asks for roll_dice, a tool result is
    answered in words, anything else gets "<name> answers"; so a reply names its model."""

    def step(messages: list[Message], tools: list[ToolDefinition]) -> LLMResponse:
        last = messages[-1]
        if last.role == "tool":
            return LLMResponse(
                content=f"{name}: {last.content}",
                finish_reason="stop",
                usage=Usage(1200, 30, cached_tokens=1000),
            )
        if "roll" in str(last.content) and tools:
            call = ToolCall(id=f"c{len(messages)}", name="roll_dice", arguments='{"sides": 20}')
            return LLMResponse(tool_calls=[call], finish_reason="tool_calls", usage=Usage(1100, 20))
        return LLMResponse(content=f"{name} answers", finish_reason="stop", usage=Usage(900, 12))

    return step


@dataclass
class Console:
    """The running bot as the tests see it."""

    url: str
    bot: Bot
    loop: asyncio.AbstractEventLoop
    main: ScriptedModel
    cheap: ScriptedModel
    expired_event: int

    def needs(self, *paths: str) -> None:
        """Skips the test while an endpoint it reads is not served yet (the API lands in
        parts; docs/admin-api.md lists them all)."""
        for path in paths:
            request = urllib.request.Request(
                self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            try:
                urllib.request.urlopen(request, timeout=5).close()
            except urllib.error.HTTPError as error:
                if error.code == 404 and "no such endpoint" in error.read().decode():
                    pytest.skip(f"the admin API does not serve {path} yet")

    def run(self, coro: Any, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def post(self, chat_id: str, text: str, *, sender: str = "ann", **extra: Any) -> dict[str, Any]:
        """A message through the HTTP channel's own API, as a client sends it."""
        body = {
            "chat_id": chat_id,
            "sender_id": sender,
            "sender_name": sender.title(),
            "text": text,
        }
        body.update(extra)
        request = urllib.request.Request(
            self.url + "/v1/messages",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


TONE_PLUGIN = Path(__file__).resolve().parents[2] / "fixtures" / "plugins" / "tone.py"


def _hash(user: str) -> str:
    # A low scrypt cost: the hash names its own, and a test need not pay for a login's.
    return hash_password(PASSWORDS[user], n=2**10)


def _settings(tmp: Path) -> Any:
    model = {"provider": "openai", "model": "x", "api_key": "k"}
    return parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp / 'admin.db'}"},
            # A third-party plugin with a per-chat key of its own: the chat's form shows it.
            "plugins": {"paths": [str(TONE_PLUGIN)]},
            "bot": {"model": "main", "language": "en", "timezone": "UTC"},
            "models": {
                "main": {**model, "price": {"input": 2.0, "output": 8.0, "cached_input": 0.5}},
                "cheap": {**model, "price": {"input": 0.1, "output": 0.4}},
            },
            "personas": {"pirate": "You answer like a pirate."},
            "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": TOKEN}},
            "admin": {
                "users": {
                    "alice": {"password_hash": _hash("alice")},
                    "carol": {"password_hash": _hash("carol"), "chats": [f"http:{TEAM}*"]},
                }
            },
        },
        base_dir=tmp,
    )


@contextmanager
def running_console(tmp: Path, *, week: bool = False) -> Iterator[Console]:
    """The bot with its HTTP channel on a loop of its own (so blocking Selenium calls never
    stall it), seeded through its real paths; `week`: a week of traffic for screenshots."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    main = ScriptedModel([_answer("main")], name="main", repeat_last=True)
    cheap = ScriptedModel([_answer("cheap")], name="cheap", repeat_last=True)

    async def start() -> tuple[Bot, HttpChannel]:
        bot = Bot(
            _settings(tmp),
            registry=_registry(),
            model=main,
            models={"cheap": cheap},
            load_plugins=False,
        )
        channel = HttpChannel(bot.channel_host)
        await channel.start()
        return bot, channel

    bot, channel = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    seeded = Console(f"http://127.0.0.1:{channel.bound_port}", bot, loop, main, cheap, 0)
    try:
        if week:
            _seed_week(seeded)
        seeded.expired_event = _seed(seeded)
        yield seeded
    finally:

        async def stop() -> None:
            await channel.stop()
            await bot.aclose()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def _seed(console: Console) -> int:
    """History, tool calls, usage with cost, a reminder and undelivered outbox rows. Returns
    the outbox row marked expired."""
    console.post(TEAM, "@bot roll a d20", is_group=True, at_bot=True, chat_name="Team Room")
    console.post(TEAM, "@bot thanks", is_group=True, at_bot=True, chat_name="Team Room")
    console.post(BOB, "hello there", sender="bob")
    console.post(
        TEAM,
        "/reminder_set text=stand-up kind=daily at=09:30",
        is_group=True,
        at_bot=True,
        chat_name="Team Room",
    )
    console.post(MALLORY, "hi", sender="mallory", sender_name=HOSTILE)
    # No telegram channel runs: these stay owed; one is then given up as expired.
    for text in ("owed one", "owed two"):
        console.run(
            console.bot.send(
                OutgoingMessage(platform="telegram", chat_id="-100555", text=text, is_group=True)
            )
        )
    owed = console.bot.storage.outbox.pending(platform="telegram")
    assert len(owed) == 2
    assert console.bot.storage.outbox.mark(owed[0].id, "expired")
    return owed[0].id


def _seed_week(console: Console) -> None:
    """For the screenshots only: a week of traffic, so the charts have a shape. Each day's
    messages go through the bot now and are then moved back to that day in the database."""
    from datetime import timedelta

    from sqlalchemy import select, update

    from chatfn.storage.models import messages_table, outbox_table, tool_calls_table, usage_table

    engine = console.bot.storage.engine
    chats = [("group:dev", "Developers"), ("group:ops", "Ops"), ("group:games", "Game night")]
    for days_ago in range(6, 0, -1):
        with engine.connect() as conn:
            marks = {
                t: conn.execute(select(t.c.id).order_by(t.c.id.desc())).scalar() or 0
                for t in (messages_table, tool_calls_table, usage_table, outbox_table)
            }
        for n in range((days_ago * 7) % 5 + 2):
            chat, name = chats[(n + days_ago) % len(chats)]
            text = "@bot roll a d20" if (n + days_ago) % 3 == 0 else f"@bot question {n}"
            console.post(
                chat, text, sender=f"user{n % 4}", is_group=True, at_bot=True, chat_name=name
            )
        with engine.begin() as conn:
            for table, after in marks.items():
                rows = conn.execute(
                    select(table.c.id, table.c.created_at).where(table.c.id > after)
                )
                shift = timedelta(days=days_ago, hours=days_ago % 4)
                for row_id, created in rows.all():
                    values = {"created_at": created - shift}
                    if table is outbox_table:  # a reply's delivery: the turn's latency
                        values["updated_at"] = created - shift
                    conn.execute(update(table).where(table.c.id == row_id).values(**values))
