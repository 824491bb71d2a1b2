"""The Discord channel beyond the shared contract: threads, the legacy `<@!id>` mention, a
reply to the bot's message, the guild owner and Manage Server as admins, hostile Markdown and
@everyone, RESUME, INVALID_SESSION and catch-up, a dead token and missing intents (one line, a ✗ in
check_system), a deleted channel, a crash found sent from the channel's history after
Discord's nonce window. discord.py against tests/channels/discord/discord_fake.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from loguru import logger

from chatfn.channels.discord import SPEC, check
from chatfn.channels.discord.settings import DiscordSettings
from chatfn.common.messages import DeliveryRefused, OutgoingMessage
from chatfn.runtime.settings import parse_settings
from tests.channels.contract import ChannelContract, Chat, Start, _all_sent, _unmark_last
from tests.channels.discord.discord_driver import DiscordDriver, as_sent, visible
from tests.channels.discord.discord_fake import BOT_ID, MESSAGE_CONTENT, OWNER_ID, FakeDiscord, user
from tests.kit.until import until

pytest.importorskip("discord")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def errors() -> Iterator[list[str]]:
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(m.record["message"]), level="ERROR")
    yield seen
    logger.remove(sink)


class TestDiscord:
    start = ChannelContract.start  # a real bot on SQLite with the driver's channel

    @pytest.fixture
    async def driver(self) -> AsyncIterator[DiscordDriver]:
        async with FakeDiscord() as server:
            driver = DiscordDriver(server)
            yield driver
            await driver.detach()

    async def test_a_thread_is_its_own_chat_and_the_nick_mention_is_removed(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        run = await start(bot={"reply_with_mention": False})
        guild = driver.server.add_thread(6001, 6002)
        said = await driver.server.say(
            6002, f"<@!{BOT_ID}>  how are you", author=1001, mentions=[user(BOT_ID, bot=True)]
        )
        [reply] = await driver.server.wait_sent(6002, 1)
        assert visible(reply.payload["content"])[0] == "echo: how are you"
        row = await run.user_row(Chat("group", "6002"), said["id"])
        assert row.chat_id == f"guild:{guild.id}/thread:6002" and row.is_at_bot
        assert row.text.endswith("how are you") and str(BOT_ID) not in row.text

    async def test_other_bots_are_marked_and_answered_only_where_a_rule_allows(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        """Issue 40 §3: author.bot marks the sender (sender_is_bot); another bot's message is
        stored and not answered (ignored: bot_sender) unless a chats: rule sets answer_bots."""
        rules = [{"match": {"chat_id": "*6102"}, "answer_bots": True}]
        run = await start(bot={"reply_with_mention": False}, chats=rules)
        mention = [user(BOT_ID, bot=True)]
        for channel in (6101, 6102):
            await driver.server.say(
                channel, f"<@{BOT_ID}> ping", author=7777, bot=True, mentions=mention
            )
        [reply] = await driver.server.wait_sent(6102, 1)
        assert visible(reply.payload["content"])[0] == "echo: ping"
        await until(lambda: run.bot.metrics.message_fates.values.get(("ignored",)) == 1)
        assert [s for s in driver.server.sent if s.channel_id == 6101] == []

    async def test_a_reply_to_the_bots_message_addresses_it(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        run = await start(bot={"reply_with_mention": False})
        group = Chat("group", "6003")
        await driver.say(group, "first", mention=True)
        [posted] = await driver.server.wait_sent(6003, 1)
        said = await driver.server.say(6003, "and then?", author=1001, reply_to=posted.message)
        replies = await driver.sent(group, 2)
        assert replies[1].text.endswith("and then?") and "first" in replies[1].text  # quoted
        row = await run.user_row(group, said["id"])
        assert row.is_at_bot
        # a reply to someone else's message is not addressed to the bot
        other = await driver.server.say(6003, "me too", author=1002)
        await driver.server.say(6003, "not you", author=1001, reply_to=other)
        await driver.say(group, "last", mention=True)
        replies = await driver.sent(group, 3)
        assert [replies[0].text, replies[2].text] == ["echo: first", "echo: last"]

    async def test_the_owner_and_manage_server_are_admins(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        run = await start(
            bot={"trust_group_admins": True, "reply_with_mention": False},
            personas={"pirate": "Arr."},
        )
        state = run.bot.storage.chat_state
        owner, manager = Chat("group", "6004"), Chat("group", "6005")
        await driver.say(owner, "/persona pirate", sender=str(OWNER_ID))
        await driver.say(manager, "/persona pirate", sender="1012", role="manager")
        await driver.sent(owner, 1)
        await driver.sent(manager, 1)
        for chat in (owner, manager):
            overrides = state.overrides("discord", driver.chat_id(chat))
            assert overrides["persona"].value == "pirate"

    async def test_hostile_markdown_and_everyone_arrive_as_written_without_pings(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        await start()
        chat = Chat("private", "1020")
        hostile = "1.5 _*[]~>#+-=|{}.! (see) \\ @everyone @here <#1> a_b_c ~~x"
        await driver.say(chat, hostile)
        [posted] = await driver.server.wait_sent(driver.channel_of(chat), 1)
        text, styles = visible(posted.payload["content"])
        assert text == f"echo: {hostile}" and styles == set()
        assert posted.payload["allowed_mentions"]["parse"] == []

    async def test_a_drop_is_resumed_and_the_missed_events_replayed(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        await start()
        chat = Chat("private", "1021")
        await driver.drop_connection()
        await driver.say(chat, "while away")  # replayed on RESUME
        [reply] = await driver.sent(chat, 1, timeout=30)
        assert reply.text == "echo: while away"
        assert (driver.server.identifies, driver.server.resumes) == (1, 1)

    async def test_what_was_said_without_a_session_is_caught_up(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        """An invalid session: discord.py identifies anew (a new session replays nothing);
        the chat's history gives what was said meanwhile."""
        await start()
        chat = Chat("private", "1024")
        await driver.say(chat, "before")
        await driver.sent(chat, 1)
        identified = driver.server.identifies
        await driver.server.invalidate()
        await driver.say(chat, "while away")  # dispatched to no one; lost for the Gateway
        await until(
            lambda: driver.server.identifies != identified, 30, "the channel did not identify again"
        )
        replies = await driver.sent(chat, 2, timeout=30)
        assert [r.text for r in replies] == ["echo: before", "echo: while away"]
        assert driver.server.identifies == identified + 1
        await driver.say(chat, "after")
        replies = await driver.sent(chat, 3, timeout=30)
        assert [r.text for r in replies][2:] == ["echo: after"]  # and nothing twice

    async def test_a_deleted_channel_is_refused_with_one_line(
        self, driver: DiscordDriver, start: Start, errors: list[str]
    ) -> None:
        await start()
        assert driver.channel is not None
        gone = OutgoingMessage("discord", "guild:1/channel:424242", "hello?", is_group=True)
        with pytest.raises(DeliveryRefused):
            await driver.channel.send(gone)
        assert len(errors) == 1 and "guild:1/channel:424242" in errors[0]
        with pytest.raises(DeliveryRefused):
            await driver.channel.send(OutgoingMessage("discord", "group:1", "x"))

    async def test_a_crash_after_the_nonce_window_is_found_in_the_history(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        run = await start()
        chat = Chat("private", "1022")
        await driver.say(chat, "hello")
        await driver.sent(chat, 1)
        await _unmark_last(run.bot, "discord", driver.chat_id(chat))
        await driver.detach()
        await run.bot.aclose()
        driver.server.nonces.clear()  # Discord keeps nonces a few minutes only
        await start()
        await driver.say(chat, "later")
        replies = await _all_sent(driver, chat, lambda got: got[-1].text == "echo: later")
        assert [r.text for r in replies] == ["echo: hello", "echo: later"]

    async def test_an_image_url_goes_out_as_an_embed_with_the_last_part(
        self, driver: DiscordDriver, start: Start
    ) -> None:
        await start()
        assert driver.channel is not None
        chat = Chat("private", "1023")
        await driver.channel.send(
            OutgoingMessage(
                "discord", "dm:1023", "see", images=["https://cdn.example.com/a.png"], event_id=7
            )
        )
        [posted] = await driver.server.wait_sent(driver.channel_of(chat), 1)
        assert as_sent(chat, posted).images == ["https://cdn.example.com/a.png"]
        assert posted.payload["nonce"].startswith("cf7.0.")


async def test_a_dead_token_is_one_line_and_a_cross_in_check(errors: list[str]) -> None:
    async with FakeDiscord() as server:
        bad = DiscordSettings(token="revoked", **server.urls)
        [offline, online] = await check(bad, True)
        assert offline.status == "ok" and online.status == "fail" and "401" in online.detail
        good = DiscordSettings(token=server.token, **server.urls)
        assert (await check(good, True))[1].status == "ok"
        server.app_flags = 0  # the portal's privileged intents switched off
        probe = (await check(good, True))[-1]  # the intents: a probe beside the login
        assert probe.status == "fail" and "Message Content Intent" in probe.detail
        assert (await check(DiscordSettings(), False))[0].status == "fail"

        # Running, the refused token is one line, the channel down and retried slowly; the
        # rest of the bot runs on (it used to end the bot with a traceback and exit code 1).
        channel = SPEC.factory(_Host(), bad)  # type: ignore[arg-type]
        await channel.start()
        try:
            await until(lambda: channel.connect_attempts >= 1 and bool(errors))
            assert not channel.connected and "channels.discord.token" in channel.status
            assert channel._running is not None and not channel._running.done()
        finally:
            await channel.stop()
        assert len(errors) == 1 and "channels.discord.token" in errors[0]


async def test_privileged_intents_not_granted_is_one_line(errors: list[str]) -> None:
    async with FakeDiscord() as server:
        server.granted_intents = MESSAGE_CONTENT  # Server Members Intent switched off
        settings = DiscordSettings(token=server.token, **server.urls)
        channel = SPEC.factory(_Host(), settings)  # type: ignore[arg-type]
        running = asyncio.create_task(channel.run())
        try:
            await until(lambda: bool(errors), timeout=20)
            assert not running.done() and not channel.connected  # down, retried slowly
        finally:
            await channel.stop()
            await running
        assert len(errors) == 1 and "4014" in errors[0] and "member_events" in errors[0]


def test_bad_urls_name_their_key(tmp_path: Path) -> None:
    for key, value in (("api_base", "discord.com/api"), ("gateway_url", "https://x")):
        with pytest.raises(Exception, match=rf"channels\.discord\.{key}"):
            parse_settings({"channels": {"discord": {key: value}}}, base_dir=tmp_path)


def test_readme_documents_the_channel() -> None:
    # The channel's README (the console's Channels page shows it) is the Discord section of
    # docs/running-channels.md, its heading one level up and its links relative to docs/.
    page = (ROOT / "docs" / "running-channels.md").read_text(encoding="utf-8")
    assert SPEC.readme.replace("### ", "## ", 1).replace("](docs/", "](") in page
    for key in DiscordSettings.model_fields:
        assert f"`{key}`" in SPEC.readme or f"channels.discord.{key}" in SPEC.readme


class _Host:
    """The least a channel needs to be built and fail to log in (tests that never send)."""

    def register(self, sender: object) -> None:
        pass

    def kick(self) -> None:
        pass
