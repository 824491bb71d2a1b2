"""The channel contract (issue 25, "What every channel does"), written once and run against
every channel with a driver for its local fake platform.

A channel's test module subclasses `ChannelContract` and gives a `driver` fixture:

    class TestTelegramContract(ChannelContract):
        @pytest.fixture
        async def driver(self, tmp_path):
            async with FakeTelegram() as server:
                yield TelegramDriver(server)

The driver (the `Driver` protocol below) builds the channel through its `ChannelSpec` with the
bot's `ChannelHost`, and speaks for the fake platform: a user says something (in a private or a
group chat, mentioning the bot or not, with an image, as a group admin), the bot's sends are
read back as `Sent`, a member joins, the connection drops, the platform answers 429. What a
platform does not have (OneBot has no 429; the HTTP API has no groups' admins) is left out of
the driver's `features`, and those tests are skipped with the reason, never passed.

The bot here is real (storage on a SQLite file, the outbox, the router); its model echoes what
it is told, and four functions make replies of known shape: `/echo TEXT`, `/picture` (an
image out), `/essay` (longer than any platform's limit, with a code block), `/styled` (bold,
italics, code and a link).
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import pytest
from pydantic import BaseModel, Field

from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.registry import Registry
from providers.types import LLMResponse, Message, Usage
from tests.kit import until

Kind = Literal["private", "group"]
Feature = Literal[
    "groups",  # group chats: mentions, respond_in_groups, reply_with_mention
    "quote",  # reply_with_quote quotes the message answered
    "images_in",
    "images_out",
    "markdown",  # formatting arrives as the platform's own (Sent.styles)
    "plain",  # a platform without formatting (QQ): the Markdown arrives as readable plain text
    "split",  # replies longer than `max_length` arrive as several messages
    "rate_limit",  # the platform answers 429 / retry_after (`rate_limit_next`)
    "reconnect",  # the connection drops and comes back (`drop_connection`)
    "crash_redelivery",  # what the outbox owes after a crash reaches the platform
    "message_ids",  # sends have ids the channel can check: never twice after a crash
    "member_joined",
    "roles",  # group owner/admin as the platform reports them
    "mention_only",  # groups send the bot only messages that mention it (QQ groups)
    "credentials",  # the platform can refuse the bot's credentials (`refuse_credentials`)
    "no_group_mentions",  # a group reply cannot mention its user (QQ groups: plain text)
]

#: A 1x1 PNG: the image a user sends and the image `/picture` returns.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()
ESSAY = "\n\n".join(
    [f"Paragraph {n}: " + " ".join(f"word{n}x{i}" for i in range(60)) for n in range(1, 8)]
    + ["```python\n" + "\n".join(f"line_{i} = {i}" for i in range(80)) + "\n```", "The end."]
)
STYLED = "Some **bold**, some _italics_, `code_here` and [a link](https://example.com/x_(y))."


@dataclass(frozen=True, slots=True)
class Chat:
    """A chat on the fake platform: its kind and the platform's own id of it."""

    kind: Kind
    native: str


@dataclass(slots=True)
class Sent:
    """One message the bot sent, as the fake platform received it."""

    chat: Chat
    text: str  # what a user reads: markup removed, mentions not included
    mentions: list[str] = field(default_factory=list)  # user ids mentioned
    quote: str | None = None  # the platform message id quoted
    images: list[bytes | str] = field(default_factory=list)  # bytes, or a URL as sent
    styles: set[str] = field(default_factory=set)  # "bold", "italic", "code", "link" shown
    message_id: str | None = None


class Driver(Protocol):
    """A channel and its fake platform, as the contract drives them."""

    platform: str  # IncomingMessage.platform
    features: frozenset[str]
    max_length: int  # the platform's message limit (characters as it counts them)
    bot_user: str  # the bot's own user id on the platform

    def channel_settings(self) -> dict[str, Any]:
        """The `channels.<name>:` section pointing the channel at the fake platform."""
        ...

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        """Build the channel (its spec's factory) on `host`, start it, connect the platform;
        return once a message can flow both ways."""
        ...

    async def detach(self) -> None:
        """Stop the channel (the bot is closed by the kit); the fake platform keeps running,
        with what it received."""
        ...

    def chat_id(self, chat: Chat) -> str:
        """The IncomingMessage.chat_id the channel gives this chat."""
        ...

    async def say(
        self,
        chat: Chat,
        text: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
    ) -> str:
        """A user's message (mentioning the bot, with an image, with a platform role in the
        group); returns its platform message id ("" when the platform gives none back)."""
        ...

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        """Wait until the platform received at least `count` messages of the bot in `chat`;
        return them all, in order."""
        ...

    async def member_joins(self, chat: Chat, user: str, name: str) -> None: ...

    async def drop_connection(self) -> None:
        """Cut the connection; the channel (or the platform's client) must reconnect."""
        ...

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        """The platform answers the next send to `chat` with 429 and `retry_after`."""
        ...

    async def refuse_credentials(self, refused: bool) -> None:
        """The platform refuses the bot's token or secret from now on (a token revoked while
        the bot runs: the connection it holds is cut, as the platform would), or takes them
        again (`refused` False)."""
        ...


# -- the bot under test ----------------------------------------------------------------------
class EchoArgs(BaseModel):
    text: str = Field(description="What to say.")


def contract_registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(name="echo", description="Say the text back.")
        async def echo(ctx: MessageContext, args: EchoArgs) -> FunctionResult:
            return FunctionResult(messages=[args.text])

        @tool_function(name="picture", description="Send a picture.")
        async def picture(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["a picture"], images=[PNG_URI])

        @tool_function(name="essay", description="A reply longer than any message limit.")
        async def essay(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[ESSAY])

        @tool_function(name="styled", description="A reply with formatting.")
        async def styled(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[STYLED])

    return registry


def _echo(messages: list[Message], _tools: Any) -> LLMResponse:
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    text = (last.content or "") if last else ""
    # The turn's note the bot adds for the model (time, speaker), wherever it sits, and a
    # group's background chatter (ambient context, function_calls/conversation.py).
    note = r"<context>.*?</context>|\[Current time:[^\]]*\]|<background>.*?</background>"
    text = re.sub(note, "", text, flags=re.S).strip()
    if last is not None and last.name and text.startswith(f"{last.name}: "):
        text = text[len(last.name) + 2 :]  # a group's speaker, named for the model
    return LLMResponse(content=f"echo: {text.strip()}", finish_reason="stop", usage=Usage(5, 5))


@dataclass
class Running:
    bot: Bot
    driver: Driver

    async def user_row(self, chat: Chat, message_id: str, timeout: float = 10.0) -> Any:
        """The stored history row of a user's message (text, chat_id, is_group, is_at_bot),
        waited for; `message_id` "" (a platform that gives none back): the chat's newest."""
        from sqlalchemy import select

        from chatfn.storage.models import messages_table as m

        storage = self.bot.storage
        query = select(m.c.text, m.c.chat_id, m.c.is_group, m.c.is_at_bot).where(
            m.c.platform == self.driver.platform, m.c.role == "user"
        )
        if message_id:
            query = query.where(m.c.message_id == message_id)
        else:
            query = query.where(m.c.chat_id == self.driver.chat_id(chat)).order_by(m.c.id.desc())

        def read() -> Any:
            with storage.engine.connect() as conn:
                return conn.execute(query).first()

        row: Any = None

        async def stored() -> bool:
            nonlocal row
            row = await storage.run(read)
            return row is not None

        await until(stored, timeout, f"no stored message from {self.driver.platform}")
        return row


Start = Callable[..., Awaitable[Running]]


class ChannelContract:
    """The contract's tests; a subclass gives the `driver` fixture."""

    @pytest.fixture
    async def start(self, driver: Driver, tmp_path: Path) -> AsyncIterator[Start]:
        """`await start(**config)`: a bot on a SQLite file under tmp_path (the same file on
        every start: a restart keeps the outbox) with the driver's channel attached."""
        bots: list[Bot] = []

        async def make(**config: Any) -> Running:
            data: dict[str, Any] = {
                "storage": {"url": f"sqlite:///{tmp_path / 'contract.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "contractbot", "admins": ["9999"], **config.pop("bot", {})},
                "channels": {driver.platform: driver.channel_settings()},
                **config,
            }
            settings = parse_settings(data, base_dir=tmp_path)
            model = ScriptedModel([_echo], repeat_last=True)
            bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
            bots.append(bot)
            await driver.attach(bot.channel_host, getattr(settings.channels, driver.platform))
            await bot.start()
            return Running(bot, driver)

        yield make
        await driver.detach()
        for bot in bots:
            await bot.aclose()

    @staticmethod
    def need(driver: Driver, *features: str) -> None:
        missing = [f for f in features if f not in driver.features]
        if missing:
            pytest.skip(f"{driver.platform} has no {', '.join(missing)}")

    # -- chats and mentions ------------------------------------------------------------------
    async def test_private_chat_ids_are_stable_and_hold_the_platforms_id(
        self, driver: Driver, start: Start
    ) -> None:
        run = await start()
        chat = Chat("private", "1001")
        first = await driver.say(chat, "hello")
        second = await driver.say(chat, "again")
        replies = await driver.sent(chat, 2)
        assert [r.text for r in replies[:2]] == ["echo: hello", "echo: again"]
        rows = [await run.user_row(chat, first), await run.user_row(chat, second)]
        assert {r.chat_id for r in rows} == {driver.chat_id(chat)}
        assert platform_id(driver, chat) in driver.chat_id(chat)

    async def test_group_mention_is_recognised_and_removed(
        self, driver: Driver, start: Start
    ) -> None:
        self.need(driver, "groups")
        run = await start(bot={"reply_with_mention": False})
        group = Chat("group", "5001")
        said = await driver.say(group, "what time is it", mention=True)
        [reply] = await driver.sent(group, 1)
        assert reply.text == "echo: what time is it"
        row = await run.user_row(group, said)
        assert row.is_at_bot and row.is_group and driver.bot_user not in row.text
        assert platform_id(driver, group) in driver.chat_id(group)
        assert driver.chat_id(group) != driver.chat_id(Chat("private", group.native))

    async def test_respond_in_groups_at_and_always(self, driver: Driver, start: Start) -> None:
        self.need(driver, "groups")
        await start(bot={"reply_with_mention": False})
        group = Chat("group", "5002")
        await driver.say(group, "not for the bot")
        await driver.say(group, "for the bot", mention=True)
        replies = await driver.sent(group, 1)
        assert [r.text for r in replies] == ["echo: for the bot"]  # in order: the first got none

    async def test_respond_in_groups_always(self, driver: Driver, start: Start) -> None:
        self.need(driver, "groups")
        if "mention_only" in driver.features:
            pytest.skip(f"{driver.platform} sends the bot no group message that lacks its mention")
        await start(bot={"reply_with_mention": False, "respond_in_groups": "always"})
        group = Chat("group", "5003")
        await driver.say(group, "anyone?")
        [reply] = await driver.sent(group, 1)
        assert reply.text == "echo: anyone?"

    async def test_reply_with_mention_and_quote(self, driver: Driver, start: Start) -> None:
        self.need(driver, "groups")
        await start(
            bot={"reply_with_mention": True, "reply_with_quote": "quote" in driver.features}
        )
        group = Chat("group", "5004")
        said = await driver.say(group, "hi", sender="1002", mention=True)
        [reply] = await driver.sent(group, 1)
        mentions = [] if "no_group_mentions" in driver.features else ["1002"]
        assert reply.text.strip() == "echo: hi" and reply.mentions == mentions
        if "quote" in driver.features:
            assert reply.quote == said

    async def test_no_mention_when_reply_with_mention_is_off(
        self, driver: Driver, start: Start
    ) -> None:
        self.need(driver, "groups")
        await start(bot={"reply_with_mention": False})
        group = Chat("group", "5005")
        await driver.say(group, "hi", sender="1002", mention=True)
        [reply] = await driver.sent(group, 1)
        assert reply.mentions == [] and reply.quote is None

    # -- images, length, formatting ----------------------------------------------------------
    async def test_an_image_in_reaches_the_bot(self, driver: Driver, start: Start) -> None:
        self.need(driver, "images_in")
        run = await start()
        chat = Chat("private", "1003")
        said = await driver.say(chat, "look", image=PNG)
        await driver.sent(chat, 1)
        row = await run.user_row(chat, said)
        assert "[image: " in row.text  # the message carried the image to the bot

    async def test_an_image_out_arrives_as_an_image(self, driver: Driver, start: Start) -> None:
        self.need(driver, "images_out")
        await start()
        chat = Chat("private", "1004")
        await driver.say(chat, "/picture")
        # with its caption, or after it as a message of its own (QQ groups and C2C)
        sent = await _all_sent(driver, chat, lambda got: any(s.images for s in got))
        [reply] = [s for s in sent if s.images]
        assert reply.images[0] == PNG or isinstance(reply.images[0], str)
        assert len(sent) <= 2 and "a picture" in " ".join(s.text for s in sent)

    async def test_a_long_reply_is_split_within_the_limit(
        self, driver: Driver, start: Start
    ) -> None:
        self.need(driver, "split")
        await start()
        chat = Chat("private", "1005")
        await driver.say(chat, "/essay")
        parts = await _all_sent(driver, chat, lambda got: "The end." in got[-1].text)
        assert len(parts) >= 2
        assert all(len(p.text) <= driver.max_length for p in parts)
        words = " ".join(p.text for p in parts).split()
        # What a user reads: the platform's formatting, or the Markdown made plain (QQ).
        formatted = {"markdown", "plain"} & driver.features
        assert words == (_visible(ESSAY) if formatted else ESSAY).split()

    async def test_markdown_arrives_as_the_platforms_formatting(
        self, driver: Driver, start: Start
    ) -> None:
        self.need(driver, "markdown")
        await start()
        chat = Chat("private", "1006")
        await driver.say(chat, "/styled")
        [reply] = await driver.sent(chat, 1)
        assert {"bold", "italic", "code", "link"} <= reply.styles, reply
        assert "**" not in reply.text and "`" not in reply.text

    async def test_markdown_arrives_as_plain_text_where_there_is_no_formatting(
        self, driver: Driver, start: Start
    ) -> None:
        self.need(driver, "plain")
        await start()
        chat = Chat("private", "1016")
        await driver.say(chat, "/styled")
        [reply] = await driver.sent(chat, 1)
        assert reply.text == (
            "Some bold, some italics, code_here and a link (https://example.com/x_(y))."
        ), reply

    # -- rate limits, reconnects, crashes ----------------------------------------------------
    async def test_429_is_honoured_and_order_kept(self, driver: Driver, start: Start) -> None:
        self.need(driver, "rate_limit")
        await start()
        chat = Chat("private", "1007")
        await driver.rate_limit_next(chat, 1.0)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await driver.say(chat, "one")
        await driver.say(chat, "two")
        replies = await driver.sent(chat, 2)
        assert [r.text for r in replies] == ["echo: one", "echo: two"]
        assert loop.time() - began >= 1.0

    async def test_a_dropped_connection_comes_back(self, driver: Driver, start: Start) -> None:
        self.need(driver, "reconnect")
        await start()
        chat = Chat("private", "1008")
        await driver.say(chat, "before")
        await driver.sent(chat, 1)
        await driver.drop_connection()
        await driver.say(chat, "after")
        replies = await driver.sent(chat, 2, timeout=30)
        assert [r.text for r in replies] == ["echo: before", "echo: after"]

    async def test_a_crash_between_send_and_mark_delivers_at_least_once(
        self, driver: Driver, start: Start
    ) -> None:
        """The platform took a message; the bot died before marking its outbox row. The next
        start sends what the row owes: at least once, and exactly once where the platform's
        message ids let the channel see it was sent."""
        self.need(driver, "crash_redelivery")
        run = await start()
        chat = Chat("private", "1009")
        await driver.say(chat, "hello")
        [first] = await driver.sent(chat, 1)
        await _unmark_last(run.bot, driver.platform, driver.chat_id(chat))
        await driver.detach()
        await run.bot.aclose()
        await start()  # the same database: the row is owed
        await driver.say(chat, "later")
        replies = await _all_sent(driver, chat, lambda got: got[-1].text == "echo: later")
        texts = [r.text for r in replies]
        assert texts.count(first.text) >= 1
        if "message_ids" in driver.features:
            assert texts == ["echo: hello", "echo: later"]

    async def test_refused_credentials_are_one_line_down_and_a_slow_retry(
        self, driver: Driver, start: Start, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Issue 39: at run time the platform refuses the credentials. The channel says so in
        one clear line (not one per try), shows as down in health (/healthz, the console),
        tries again slowly and keeps the bot running: once they work again it answers."""
        self.need(driver, "credentials")
        from loguru import logger

        from chatfn.channels.kit import channel as kit
        from chatfn.runtime.channel_host import channel_state

        monkeypatch.setattr(kit, "REFUSED_RETRY", 0.1)  # "slowly": every 60 s when running
        run = await start()
        chat = Chat("private", "1012")
        await driver.say(chat, "before")
        await driver.sent(chat, 1)
        channel: Any = run.bot.delivery.channels[driver.platform]
        lines: list[str] = []
        sink = logger.add(lambda m: lines.append(m.record["message"]), level="ERROR")
        try:
            refusals = channel.refusals
            await driver.refuse_credentials(True)
            # generous: a real server may delay each refused login (Dovecot: 2 s) on a loaded CI
            await until(  # refused, and tried again twice
                lambda: channel.refusals >= refusals + 3, 60, "not refused three times"
            )
            state = channel_state(driver.platform, channel)
            assert state["connected"] is False and "refused" in state["detail"], state
            said = [line for line in lines if "refused" in line]
            assert len(said) == 1, lines
            await driver.refuse_credentials(False)
            await until(lambda: channel.connected, 60, "not connected again")
        finally:
            logger.remove(sink)
        await driver.say(chat, "after")
        replies = await _all_sent(driver, chat, lambda got: got[-1].text == "echo: after")
        assert replies[0].text == "echo: before"

    # -- events and roles --------------------------------------------------------------------
    async def test_member_joined_reaches_the_welcome(self, driver: Driver, start: Start) -> None:
        self.need(driver, "groups", "member_joined")
        await start(welcome={"messages": {}, "default": "Welcome, {name}!"})
        group = Chat("group", "5006")
        await driver.member_joins(group, "1010", "Newcomer")
        [reply] = await driver.sent(group, 1)
        # The name as the platform gives it in the event (OneBot's notice carries only the id).
        assert "Welcome, Newcomer!" in reply.text or "Welcome, 1010!" in reply.text

    async def test_trust_group_admins(self, driver: Driver, start: Start) -> None:
        self.need(driver, "groups", "roles")
        run = await start(
            bot={"trust_group_admins": True, "reply_with_mention": False},
            personas={"pirate": "Arr."},
        )
        group, other = Chat("group", "5007"), Chat("group", "5008")
        state = run.bot.storage.chat_state
        await driver.say(group, "/persona pirate", sender="1011", role="member")
        [refused] = await driver.sent(group, 1)
        assert "admins only" in refused.text
        await driver.say(group, "/persona pirate", sender="1011", role="admin")
        await driver.sent(group, 2)
        assert state.overrides(driver.platform, driver.chat_id(group))["persona"].value == "pirate"
        await driver.say(other, "/persona pirate", sender="1011", role="member")
        [refused] = await driver.sent(other, 1)
        assert "admins only" in refused.text
        assert "persona" not in state.overrides(driver.platform, driver.chat_id(other))


def platform_id(driver: Driver, chat: Chat) -> str:
    """The platform's own id of `chat`: `chat.native`, or what the driver maps it to where
    the platform names chats itself (Matrix room ids are made by the homeserver)."""
    mapped = getattr(driver, "platform_id", None)
    return mapped(chat) if mapped is not None else chat.native


async def _all_sent(
    driver: Driver, chat: Chat, done: Callable[[list[Sent]], bool], timeout: float = 20.0
) -> list[Sent]:
    """Every message sent to `chat` once `done(those so far)` holds."""
    count = 1
    async with asyncio.timeout(timeout):
        while True:
            got = await driver.sent(chat, count, timeout=timeout)
            if done(got):
                return got
            count = len(got) + 1


def _visible(markdown: str) -> str:
    from chatfn.channels.markdown import to_plain

    return to_plain(markdown)


async def _unmark_last(bot: Bot, platform: str, chat_id: str) -> None:
    """Set the chat's newest delivered outbox row back to pending: what the database holds
    when the process died after the platform took the message but before the mark. The mark
    is written a moment after the send (batched, chatfn/runtime/outbox.py's HOLD): it is waited for
    first, or it would land after this and undo the crash."""
    from sqlalchemy import select, update

    from chatfn.storage.models import outbox_table

    storage = bot.storage
    newest = (
        select(outbox_table.c.id, outbox_table.c.state)
        .where(outbox_table.c.platform == platform, outbox_table.c.chat_id == chat_id)
        .order_by(outbox_table.c.id.desc())
        .limit(1)
    )

    def read() -> Any:
        with storage.engine.connect() as conn:
            return conn.execute(newest).first()

    row: Any = None

    async def delivered() -> bool:
        nonlocal row
        row = await storage.run(read)
        return row is not None and row.state == "delivered"

    await until(delivered, 10, f"the newest outbox row of {chat_id} not delivered")

    def unmark() -> None:
        with storage.engine.begin() as conn:
            conn.execute(
                update(outbox_table).where(outbox_table.c.id == row.id).values(state="pending")
            )

    await storage.run(unmark)


def texts(sent: Sequence[Sent]) -> list[str]:
    return [s.text for s in sent]
