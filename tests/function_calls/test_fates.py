"""Every message's fate (issue 40 §1): each path of the router, the limits and the runtime ends
in exactly one recorded fate, `/why` tells it in one line in the chat's language (to its sender
and the chat's admins only), a stored message without a fate is held and then expired, and a
message held past `bot.held_notice_after` gets one notice."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.storage.models import message_fates_table, messages_table
from chatfn.testing import ScriptedModel, TestBot, say
from providers.errors import ProviderRateLimited
from tests.kit import until

_ids = count(1)

PLUGIN = textwrap.dedent(
    """
    import asyncio
    from pydantic import BaseModel
    from function_calls import FunctionResult, MessageContext, Plugin, tool_function

    plugin = Plugin("fate_probe")
    GATE = asyncio.Event()


    class Count(BaseModel):
        n: int


    @tool_function(description="Needs a whole number.")
    def needs_int(ctx: MessageContext, args: Count) -> FunctionResult:
        return FunctionResult(messages=[f"n={args.n}"])


    @tool_function(description="Breaks.")
    def breaks(ctx: MessageContext) -> FunctionResult:
        raise RuntimeError("boom")


    @tool_function(description="Waits for the test.")
    async def waits(ctx: MessageContext) -> FunctionResult:
        await GATE.wait()
        return FunctionResult(messages=["done waiting"])
    """
)


def _plugin(tmp_path: Path) -> str:
    path = tmp_path / "fate_probe.py"
    path.write_text(PLUGIN)
    return str(path)


async def _fates(tb: TestBot) -> list[tuple[str, str, str, bool]]:
    """(text, fate, detail, told) of every user message, in order."""
    storage = tb.bot.storage

    def read() -> list[Any]:
        q = (
            select(
                messages_table.c.text,
                message_fates_table.c.fate,
                message_fates_table.c.detail,
                message_fates_table.c.told,
            )
            .select_from(
                messages_table.outerjoin(
                    message_fates_table, message_fates_table.c.message == messages_table.c.id
                )
            )
            .where(messages_table.c.role == "user")
            .order_by(messages_table.c.id)
        )
        with storage.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(q)]

    return await storage.run(read)


async def _last(tb: TestBot) -> tuple[str, str, bool]:
    rows = await _fates(tb)
    _text, fate, detail, told = rows[-1]
    return fate, detail, told


async def test_every_path_of_the_router_and_limits_records_one_fate(tmp_path: Path) -> None:
    model = ScriptedModel([say("hello"), say("again"), ProviderRateLimited("slow down")])
    tb = TestBot(
        tmp_path,
        model=model,
        plugins=[_plugin(tmp_path)],
        config={
            "chats": [
                {"match": {"chat_id": "group:quiet"}, "respond_in_groups": "never"},
                {"match": {"chat_id": "private:dora"}, "functions": {"disabled": ["needs_int"]}},
            ],
            "limits": {"per_user": {"messages_per_minute": 2}},
        },
    )
    try:
        # answered by the model, which one named
        assert await tb.send("hi") == ["hello"]
        assert await _last(tb) == ("answered", "scripted", False)
        # answered by a function without the model
        assert await tb.send("/needs_int n=4") == ["n=4"]
        assert await _last(tb) == ("function", "needs_int", False)
        # declined: unknown command, invalid arguments, not allowed, disabled (each told)
        await tb.send("/no_such_thing")
        assert await _last(tb) == ("declined", "unknown_command /no_such_thing", True)
        await tb.send("/needs_int n=four")
        assert await _last(tb) == ("declined", "invalid /needs_int", True)
        await tb.send("/model", sender="bob")
        assert await _last(tb) == ("declined", "not_allowed /model", True)
        await tb.send("/needs_int n=1", sender="dora")
        assert await _last(tb) == ("declined", "disabled /needs_int", True)
        # failed: a function that raised (told), a provider error (told)
        await tb.send("/breaks")
        assert await _last(tb) == ("failed", "/breaks: error", True)
        assert await tb.send("still there?", sender="erin") == ["again"]
        out = await tb.send("and now?", sender="erin")
        assert "rate-limited" in out[0]
        assert await _last(tb) == ("failed", "ProviderRateLimited", True)
        # not addressed: a group message without a mention, kept as context
        assert await tb.send("chatter", group="group:team", sender="erin") == []
        assert await _last(tb) == ("not_addressed", "", False)
        # ignored by a rule: respond_in_groups never
        assert await tb.send("hey bot", group="group:quiet", at_bot=True) == []
        assert await _last(tb) == ("ignored", "respond_in_groups", False)
        # declined by a limit: erin's third message reaching the model this minute; told
        # once, then silent (the second refusal in the window is not told)
        await tb.send("more?", sender="erin")
        assert await _last(tb) == ("declined", "limit per_user.messages_per_minute", True)
        assert await tb.send("more!", sender="erin") == []
        assert await _last(tb) == ("declined", "limit per_user.messages_per_minute", False)
        rows = await _fates(tb)
        assert all(fate is not None for _t, fate, _d, _told in rows), rows
        assert tb.bot.metrics.message_fates.values[("declined",)] == 6
    finally:
        await tb.aclose()


async def test_over_budget_no_model_and_an_unhandled_error(tmp_path: Path) -> None:
    tb = TestBot(
        tmp_path,
        model=ScriptedModel([say("first")]),
        config={"limits": {"per_user": {"tokens_per_day": 5}}},
    )
    try:
        assert await tb.send("hi") == ["first"]  # 15 tokens: over the day's 5 from now on
        await tb.send("hi again")
        assert await _last(tb) == ("declined", "over_budget per_user.tokens_per_day", True)
    finally:
        await tb.aclose()
    tb = TestBot(tmp_path / "none", model=None)
    tb.bot.model = None
    try:
        if tb.bot.model_named(None) is None:
            await tb.send("anyone?")
            assert await _last(tb) == ("declined", "no_model", True)

        async def broken(ctx: Any) -> bool:
            raise KeyError("bug")

        tb.bot.router.dispatch = broken  # type: ignore[method-assign]
        out = await tb.send("crash please")
        assert "went wrong" in out[0]
        assert await _last(tb) == ("failed", "KeyError", True)
    finally:
        await tb.aclose()


def _store(tb: TestBot, text: str, sender: str, when: datetime) -> int:
    with tb.bot.storage.engine.begin() as conn:
        result = conn.execute(
            insert(messages_table).values(
                platform="test",
                chat_id=f"private:{sender}",
                is_group=False,
                role="user",
                sender_id=sender,
                sender_name=sender,
                text=text,
                message_id=f"raw{next(_ids)}",
                created_at=when,
                is_at_bot=False,
            )
        )
        return int(result.inserted_primary_key[0])


async def test_held_then_expired_and_why_tells_each_in_the_chats_language(tmp_path: Path) -> None:
    tb = TestBot(
        tmp_path,
        model=ScriptedModel([]),
        config={
            "bot": {"resume_window": 600},
            "chats": [{"match": {"chat_id": "private:zoe"}, "language": "zh"}],
        },
    )
    try:
        now = datetime.now(UTC)
        old = await tb.bot.storage.run(_store, tb, "long ago", "yan", now - timedelta(hours=2))
        recent = await tb.bot.storage.run(_store, tb, "just now", "yan", now)
        held = await tb.bot.fates.of(recent)
        assert held is not None and held.fate == "held"
        expired = await tb.bot.fates.of(old)
        assert expired is not None and expired.fate == "expired"
        # /why alone: the sender's last message before it
        assert "held, waiting" in (await tb.send("/why", sender="yan"))[0]
        # in Chinese where the chat speaks it
        await tb.send("/no_such_thing", sender="zoe")
        line = (await tb.send("/why", sender="zoe"))[0]
        assert "已拒绝" in line and "未知命令" in line and "已告知发送者" in line
        # no earlier message of one's own
        assert "no earlier message" in (await tb.send("/why", sender="newcomer"))[0]
    finally:
        await tb.aclose()


def _quoting(text: str, sender: str, quoted: str, roles: list[str] | None = None) -> Any:
    return IncomingMessage(
        platform="test",
        chat_id="group:g",
        sender_id=sender,
        sender_name=sender,
        text=text,
        is_group=True,
        is_at_bot=True,
        quoted_text=quoted,
        message_id=f"q{next(_ids)}",
        sender_roles=roles or [],
    )


async def test_why_about_another_members_message_only_for_admins(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, model=ScriptedModel([]), config={"bot": {"admins": ["root"]}})
    sink: list[OutgoingMessage] = []

    async def keep(out: OutgoingMessage) -> None:
        sink.append(out)

    try:
        await tb.send("just talking to people", group="group:g", sender="ann")
        mine = await tb.bot.handle(_quoting("/why", "ann", "just talking to people"), keep)
        assert "not addressed to the bot" in mine[0].text
        theirs = await tb.bot.handle(_quoting("/why", "ben", "just talking to people"), keep)
        assert "Only its sender or an admin" in theirs[0].text
        admin = await tb.bot.handle(_quoting("/why", "root", "just talking to people"), keep)
        assert "not addressed to the bot" in admin[0].text
        missing = await tb.bot.handle(_quoting("/why", "ann", "never said this"), keep)
        assert "cannot find" in missing[0].text
    finally:
        await tb.aclose()


async def test_a_held_message_gets_one_notice_and_its_answer(tmp_path: Path) -> None:
    tb = TestBot(
        tmp_path,
        model=ScriptedModel([]),
        plugins=[_plugin(tmp_path)],
        # Long enough that the quick answer below is never held, even on a loaded machine (at
        # 0.05 s a full run once gave it a notice); the held turn waits on a gate anyway.
        config={"bot": {"held_notice_after": 0.5}},
    )
    told: list[OutgoingMessage] = []
    deliver = tb.bot.delivery.deliver

    async def recording(out: OutgoingMessage, *args: Any, **kwargs: Any) -> None:
        if out.notice:
            told.append(out)
        await deliver(out, *args, **kwargs)

    tb.bot.delivery.deliver = recording  # type: ignore[method-assign]
    gate = next(
        spec.handler.__globals__["GATE"] for spec in tb.bot.registry.all() if spec.name == "waits"
    )
    try:
        turn = asyncio.create_task(tb.send("/waits"))
        await until(lambda: told, 5, "the held notice was not sent")
        assert [o.text for o in told] == [
            "Your message is waiting (the model or the channel is busy); I will answer when I can."
        ]
        assert told[0].notice and told[0].chat_id == "private:alice"
        gate.set()
        assert await turn == ["done waiting"]
        assert len(told) == 1  # one notice only
        assert tb.bot.metrics.message_fates.values[("held",)] == 1
        # a quick answer gets none
        assert await tb.send("/needs_int n=2") == ["n=2"]
        await asyncio.sleep(0.1)
        assert len(told) == 1
    finally:
        gate.set()
        await tb.aclose()


def _from_bot(chat: str, sender: str = "other-bot") -> IncomingMessage:
    return IncomingMessage(
        platform="test",
        chat_id=chat,
        sender_id=sender,
        sender_name=sender,
        text="hello fellow bot",
        is_group=True,
        is_at_bot=True,
        message_id=f"b{next(_ids)}",
        sender_is_bot=True,
    )


async def test_bots_are_not_answered_unless_a_chats_rule_allows_it(tmp_path: Path) -> None:
    tb = TestBot(
        tmp_path,
        model=ScriptedModel([say("hi bot")]),
        config={"chats": [{"match": {"chat_id": "group:bots-ok"}, "answer_bots": True}]},
    )
    try:
        assert await tb.bot.handle(_from_bot("group:humans")) == []
        assert await _last(tb) == ("ignored", "bot_sender", False)
        answered = await tb.bot.handle(_from_bot("group:bots-ok"))
        assert [(o.text, o.at) for o in answered] == [("hi bot", "other-bot")]
        assert await _last(tb) == ("answered", "scripted", False)
        line = (await tb.send("/why", group="group:humans", sender="root", admin=True))[0]
        assert "no earlier message" in line  # root's own: none yet
    finally:
        await tb.aclose()


async def test_the_consoles_chat_history_shows_and_filters_fates(tmp_path: Path) -> None:
    """The admin console's chat page data (GET /admin/api/chats/.../history): each incoming
    message with its fate, and `fate=` keeps only those ("every declined message this week")."""
    from chatfn.channels.http.admin.api import FATES as API_FATES
    from chatfn.storage.console.scope import Scope
    from function_calls.fates import FATES

    assert API_FATES == FATES
    tb = TestBot(tmp_path, model=ScriptedModel([say("hello")]), config={"bot": {"admins": []}})
    try:
        await tb.send("hi")
        await tb.send("/no_such_thing")
        await tb.send("/model")
        old = datetime.now(UTC) - timedelta(days=30)
        await tb.bot.storage.run(_store, tb, "long ago", "alice", old)
        chats = tb.bot.api_host.console.chats
        page = await chats.history(Scope(), "test", "private:alice", 50, None)
        users = [(m["text"], m["fate"]) for m in page["messages"] if m["role"] == "user"]
        assert users == [
            ("hi", {"fate": "answered", "detail": "scripted", "told": False}),
            (
                "/no_such_thing",
                {"fate": "declined", "detail": "unknown_command /no_such_thing", "told": True},
            ),
            ("/model", {"fate": "declined", "detail": "not_allowed /model", "told": True}),
            ("long ago", {"fate": "expired", "detail": "", "told": False}),
        ]
        assert all(m["fate"] is None for m in page["messages"] if m["role"] != "user")
        declined = await chats.history(Scope(), "test", "private:alice", 50, None, fate="declined")
        assert [m["text"] for m in declined["messages"]] == ["/no_such_thing", "/model"]
        expired = await chats.history(Scope(), "test", "private:alice", 50, None, fate="expired")
        assert [m["text"] for m in expired["messages"]] == ["long ago"]
        week = await chats.history(Scope(), "test", "private:alice", 50, None, days=7)
        everything = [m["id"] for m in page["messages"] if m["text"] != "long ago"]
        assert [m["id"] for m in week["messages"]] == everything  # 3 messages, 3 answers
    finally:
        await tb.aclose()
