"""The Telegram channel against a local Bot API server (tests/channels/telegram/telegram_fake.py),
through the real python-telegram-bot client pointed at it by `channels.telegram.base_url`.

Covers issue 25's contract for Telegram (the shared kit's bullets, written on the kit's
Driver shape in telegram_driver.py) and what is Telegram's own: forum topics, replies to the
bot, `/cmd@otherbot`, UTF-16 limits, MarkdownV2 refusals, getChatMember roles, webhooks.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytest.importorskip("telegram")

from chatfn.channels.split import utf16_len  # noqa: E402
from chatfn.common.messages import OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from tests.channels.held_model import HeldModel, broker_away  # noqa: E402
from tests.channels.telegram.telegram_driver import (  # noqa: E402
    ESSAY,
    HOSTILE,
    Chat,
    TelegramDriver,
    echo_model,
    running,
)
from tests.channels.telegram.telegram_fake import BOT_ID, BOT_USERNAME, FakeTelegram  # noqa: E402
from tests.fakes.images import png  # noqa: E402
from tests.kit import free_port, until  # noqa: E402


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def stored(bot: Bot, chat_id: str) -> list[Any]:
    """The chat's stored user messages (text, is_at_bot, message_id), oldest first."""
    from sqlalchemy import select

    from chatfn.storage.models import messages_table as m

    def read() -> list[Any]:
        with bot.storage.engine.connect() as conn:
            return list(
                conn.execute(
                    select(m.c.text, m.c.is_at_bot, m.c.message_id, m.c.is_group)
                    .where(m.c.platform == "telegram", m.c.chat_id == chat_id, m.c.role == "user")
                    .order_by(m.c.id)
                )
            )

    return await bot.storage.run(read)


# -- chats, mentions, replies ------------------------------------------------------------------
async def test_private_chat_round_trip_and_stable_chat_id(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1001")
    async with running(driver, tmp_path) as bot:
        await driver.say(chat, "hello")
        await driver.say(chat, "again")
        replies = await driver.sent(chat, 2)
        rows = await stored(bot, "private:1001")
    assert [r.text for r in replies] == ["echo: hello", "echo: again"]
    assert [r.text for r in rows] == ["hello", "again"] and not rows[0].is_group
    assert all(s.parse_mode == "MarkdownV2" for s in fake.sent)


async def test_group_mention_is_removed_and_only_addressed_messages_answered(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    group = fake.group(-1001234567890)
    chat_id = "group:-1001234567890"
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        await fake.message(group, "not for the bot")
        # An emoji before the mention: entity offsets count UTF-16 code units.
        await fake.message(
            group,
            f"\U0001f600 @{BOT_USERNAME.upper()} what time is it",
            entities=[{"type": "mention", "offset": 3, "length": len(BOT_USERNAME) + 1}],
        )
        await fake.message(group, "/help@some_other_bot")
        [reply] = await fake.wait_sent(group["id"], 1)
        rows = await stored(bot, chat_id)
    assert reply.text == "echo: \U0001f600 what time is it"
    addressed = [r for r in rows if r.is_at_bot]
    assert [r.text for r in addressed] == ["\U0001f600 what time is it"]
    assert all(r.is_group for r in rows) and "/help@some_other_bot" not in [r.text for r in rows]


async def test_a_reply_to_the_bots_message_addresses_it_and_is_quoted(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    group = fake.group(-1001000000002)
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        bots_message = {
            "message_id": 7,
            "from": fake.me,
            "chat": group,
            "date": 1700000000,
            "text": "an earlier answer",
        }
        await fake.message(group, "why?", reply_to=bots_message)
        [reply] = await fake.wait_sent(group["id"], 1)
        [row] = await stored(bot, "group:-1001000000002")
    assert row.is_at_bot and reply.text.startswith("echo: ") and reply.text.endswith("why?")
    assert "Chatfn Test: an earlier answer" in reply.text  # the quoted message reached the model


async def test_reply_with_mention_and_quote(fake: FakeTelegram, tmp_path: Path) -> None:
    driver = TelegramDriver(fake)
    group = Chat("group", "5004")
    async with running(
        driver, tmp_path, bot={"reply_with_mention": True, "reply_with_quote": True}
    ):
        said = await driver.say(group, "hi", sender="1002", mention=True)
        [reply] = await driver.sent(group, 1)
    assert reply.text == "echo: hi" and reply.mentions == ["1002"] and reply.quote == said
    assert fake.sent[0].text.startswith("Ann ")  # the mention shows the user's first name


async def test_forum_topics_are_their_own_chats_and_replies_stay_in_the_topic(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    forum = fake.group(-1009000000001, forum=True)
    mention = [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        await fake.message(forum, f"@{BOT_USERNAME} in topic", entities=mention, thread_id=42)
        await fake.message(forum, f"@{BOT_USERNAME} in general", entities=mention)
        sent = await fake.wait_sent(forum["id"], 2)
        topic_rows = await stored(bot, "group:-1009000000001:topic:42")
        general_rows = await stored(bot, "group:-1009000000001")
    by_text = {s.text: s for s in sent}
    assert by_text["echo: in topic"].thread_id == 42
    assert by_text["echo: in general"].thread_id is None
    assert [r.text for r in topic_rows] == ["in topic"]
    assert [r.text for r in general_rows] == ["in general"]


# -- images ------------------------------------------------------------------------------------
async def test_a_photo_in_reaches_the_bot_as_the_largest_size(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1003")
    image = png()
    async with running(driver, tmp_path) as bot:
        await driver.say(chat, "look", image=image)
        await driver.sent(chat, 1)
        [row] = await stored(bot, "private:1003")
    assert f"[image: image/png, {len(image)} bytes inline]" in row.text
    got = [p["file_id"] for m, p in fake.calls if m == "getFile"]
    assert got == ["AgACAgIAAx-file-2"]  # the 800x600 size, not the 90x90 one
    assert fake.token not in row.text


async def test_images_out_are_sent_with_send_photo(fake: FakeTelegram, tmp_path: Path) -> None:
    if "images" not in OutgoingMessage.__dataclass_fields__:
        pytest.skip("OutgoingMessage.images is not on this branch yet")
    driver = TelegramDriver(fake)
    image = png()
    uri = "data:image/png;base64," + base64.b64encode(image).decode()
    async with running(driver, tmp_path):
        assert driver.channel is not None
        out = OutgoingMessage("telegram", "private:1004", "a **picture**")
        out.images = [uri, "https://example.com/b.png"]  # type: ignore[attr-defined]
        await driver.channel.send(out)
        first, second = await fake.wait_sent(1004, 2)
    assert first.method == "sendPhoto" and first.photo == image
    assert first.text == "a picture" and first.kinds == {"bold"}
    assert second.method == "sendPhoto" and second.photo == "https://example.com/b.png"


# -- formatting and length ---------------------------------------------------------------------
async def test_markdown_arrives_as_telegram_formatting(fake: FakeTelegram, tmp_path: Path) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1006")
    async with running(driver, tmp_path):
        await driver.say(chat, "/styled")
        [reply] = await driver.sent(chat, 1)
    assert {"bold", "italic", "code", "link"} <= reply.styles
    assert fake.sent[0].links == ["https://example.com/x_(y)"]
    assert "**" not in reply.text and "`" not in reply.text


async def test_a_reply_full_of_reserved_characters_is_never_refused(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1012")
    async with running(driver, tmp_path):
        await driver.say(chat, "/hostile")
        [reply] = await driver.sent(chat, 1)
    # Parsed by Telegram's rules: accepted the first time, every character shown.
    assert [m for m, _ in fake.calls if m == "sendMessage"] == ["sendMessage"]
    for ch in "_*[]()~>#+-=|{}.!":
        assert reply.text.count(ch) == HOSTILE.count(ch) - (2 if ch == "~" else 0) or ch in "~", ch


async def test_cant_parse_entities_falls_back_to_plain_text(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1013")
    async with running(driver, tmp_path):
        fake.fail_next(
            1013,
            web.json_response(
                {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: can't parse entities: Character '.' is reserved",
                },
                status=400,
            ),
        )
        await driver.say(chat, "/styled")
        [reply] = await driver.sent(chat, 1)
    assert reply.text.startswith("Some bold, some italics, code_here and a link")
    assert fake.sent[0].parse_mode is None


async def test_a_long_reply_is_split_within_4096_utf16_units(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1005")
    async with running(driver, tmp_path):
        await driver.say(chat, "/essay")
        await fake.wait_for(lambda: any("The end." in s.text for s in fake.sent))
    parts = [s for s in fake.sent if s.chat_id == 1005]
    assert len(parts) >= 4
    assert all(utf16_len(p.text) <= 4096 for p in parts)
    assert max(utf16_len(p.text) for p in parts) > 3000  # packed, not one paragraph a message
    from chatfn.channels.markdown import to_plain

    assert " ".join(p.text for p in parts).split() == to_plain(ESSAY).split()
    code = [p for p in parts if "line_0 = 0" in p.text or "line_199" in p.text]
    assert code and all("pre" in p.kinds for p in code)  # a split code block stays code


# -- rate limits, reconnects, crashes ----------------------------------------------------------
async def test_429_retry_after_is_honoured_and_order_kept(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1007")
    async with running(driver, tmp_path):
        fake.rate_limit_next(1007, 1)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await driver.say(chat, "one")
        await driver.say(chat, "two")
        replies = await driver.sent(chat, 2)
        took = loop.time() - began
    assert [r.text for r in replies] == ["echo: one", "echo: two"]
    assert took >= 1.0
    sends = [p["text"] for m, p in fake.calls if m == "sendMessage"]
    assert sends == ["echo: one", "echo: one", "echo: two"]  # the refused one, again, then two


async def test_a_dropped_connection_comes_back(fake: FakeTelegram, tmp_path: Path) -> None:
    driver = TelegramDriver(fake)
    chat = Chat("private", "1008")
    async with running(driver, tmp_path):
        await driver.say(chat, "before")
        await driver.sent(chat, 1)
        await driver.drop_connection()
        await driver.say(chat, "after")
        replies = await driver.sent(chat, 2, timeout=30)
    assert [r.text for r in replies] == ["echo: before", "echo: after"]


async def test_a_send_while_telegram_is_down_waits_in_the_outbox(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    async with running(driver, tmp_path) as bot:
        await fake.stop()  # Telegram unreachable: the message is owed, not lost
        sending = asyncio.create_task(
            bot.send(OutgoingMessage("telegram", "private:1014", "reminder"))
        )
        await fake.start()
        await sending
        [sent] = await fake.wait_sent(1014, 1, timeout=30)
    assert sent.text == "reminder"


async def test_an_update_delivered_again_after_a_restart_is_handled_once(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat = fake.private(1015)
    async with running(driver, tmp_path):
        message = await fake.message(chat, "only once")
        await fake.wait_sent(1015, 1)
    # The process died before its next getUpdates confirmed the update: Telegram sends it again.
    await fake.push({"message": message})
    async with running(driver, tmp_path) as bot:
        await fake.message(chat, "next")
        sent = await fake.wait_sent(1015, 2)
        rows = await stored(bot, "private:1015")
    assert [s.text for s in sent] == ["echo: only once", "echo: next"]
    assert [r.text for r in rows] == ["only once", "next"]


async def has_stored(bot: Bot, chat_id: str, n: int) -> bool:
    return len(await stored(bot, chat_id)) >= n


async def taken_and_polled(driver: TelegramDriver, fake: FakeTelegram, update_id: int) -> None:
    """Until the channel has taken `update_id` and asked getUpdates twice more since."""
    channel = driver.channel
    assert channel is not None
    await until(lambda: update_id in channel.inbound.seen, 30.0, "the update was not taken")

    def polls() -> int:
        return sum(1 for method, _ in fake.calls if method == "getUpdates")

    before = polls()
    await until(lambda: polls() >= before + 2, 30.0, "getUpdates not asked twice more")


async def test_an_update_is_confirmed_only_once_its_message_is_stored(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    driver = TelegramDriver(fake)
    chat, gate = fake.private(1016), asyncio.Event()
    async with running(driver, tmp_path, model=HeldModel(echo_model, gate)) as bot:
        await fake.message(chat, "hold on")
        await until(lambda: has_stored(bot, "private:1016", 1), 30.0)
        await fake.message(chat, "queued behind it")
        queued = fake.updates[-1]["update_id"]
        await taken_and_polled(driver, fake, queued)
        # Taken, waiting for the chat's turn, not stored: Telegram still holds it.
        assert queued in [u["update_id"] for u in fake.updates]
        assert [r.text for r in await stored(bot, "private:1016")] == ["hold on"]
        gate.set()
        sent = await fake.wait_sent(1016, 2)
        await until(lambda: fake.updates == [], 30.0, "not confirmed")  # both confirmed now
    assert [s.text for s in sent] == ["echo: hold on", "echo: queued behind it"]


async def test_a_message_taken_but_not_stored_when_the_bot_stops_comes_again(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    """With the offset moved past it as soon as it was read, the second message was gone for
    good: Telegram had let go of it and the bot had not stored it."""
    driver = TelegramDriver(fake)
    chat = fake.private(1017)
    async with running(driver, tmp_path, model=HeldModel(echo_model, asyncio.Event())) as bot:
        await fake.message(chat, "hold on")
        await until(lambda: has_stored(bot, "private:1017", 1), 30.0)
        await fake.message(chat, "queued behind it")
        await taken_and_polled(driver, fake, fake.updates[-1]["update_id"])
    # Stopped mid-turn: the first message is stored (a start with `resume` would answer it;
    # chatfn/runtime/resume.py), the second is not, and Telegram hands it over again.
    async with running(driver, tmp_path) as bot:
        sent = await fake.wait_sent(1017, 1)
        rows = await stored(bot, "private:1017")
    assert [s.text for s in sent] == ["echo: queued behind it"]
    assert [r.text for r in rows] == ["hold on", "queued behind it"]


async def test_a_message_whose_handling_failed_before_the_store_is_taken_again(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host.handle` raising before the message is stored (what a cluster gateway does when
    its broker is away; `Bot.handle` stands in for it here, the broker being out of reach of
    this test): the update stays unconfirmed, is taken again after RETAKE_AFTER, answered
    once; one that fails every time is given up after MAX_TAKES so later updates go on."""
    from chatfn.channels import intake

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.3)
    driver = TelegramDriver(fake)
    async with running(driver, tmp_path) as bot:
        tries = broker_away(bot, monkeypatch, {"once": 1, "always": 99})
        await fake.message(fake.private(1018), "once")
        update_id = fake.updates[-1]["update_id"]
        await until(lambda: tries == ["once"], 30.0, lambda: f"tries: {tries}")
        await asyncio.sleep(0.1)
        assert update_id in [u["update_id"] for u in fake.updates]  # not confirmed
        [sent] = await fake.wait_sent(1018, 1)
        assert sent.text == "echo: once" and tries == ["once", "once"]
        await until(lambda: fake.updates == [], 30.0, "not confirmed")

        await fake.message(fake.private(1019), "always")
        await until(
            lambda: tries.count("always") == intake.MAX_TAKES, 30.0, lambda: f"tries: {tries}"
        )
        await fake.message(fake.private(1019), "after it")
        [sent] = await fake.wait_sent(1019, 1)
        # Given up: confirmed, the queue goes on.
        await until(lambda: fake.updates == [], 30.0, "not confirmed")
    assert sent.text == "echo: after it" and tries.count("always") == intake.MAX_TAKES


async def test_a_crash_between_send_and_mark_delivers_at_least_once(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    from sqlalchemy import select, update

    from chatfn.storage.models import outbox_table

    driver = TelegramDriver(fake)
    async with running(driver, tmp_path) as bot:
        await fake.message(fake.private(1009), "hello")
        await fake.wait_sent(1009, 1)

        def unmark() -> bool:
            """The newest row back to pending once it is marked delivered: what the database
            holds when the process died after Telegram took the message, before the mark."""
            with bot.storage.engine.begin() as conn:
                newest = conn.execute(
                    select(outbox_table.c.id, outbox_table.c.state)
                    .where(outbox_table.c.chat_id == "private:1009")
                    .order_by(outbox_table.c.id.desc())
                    .limit(1)
                ).one()
                if newest.state != "delivered":
                    return False
                conn.execute(
                    update(outbox_table)
                    .where(outbox_table.c.id == newest.id)
                    .values(state="pending")
                )
                return True

        await until(lambda: bot.storage.run(unmark), 30.0)
    async with running(driver, tmp_path):
        sent = await fake.wait_sent(1009, 2)
    # The Bot API cannot read a chat's history to see it went out: at least once, here twice.
    assert [s.text for s in sent] == ["echo: hello", "echo: hello"]


# -- events and roles --------------------------------------------------------------------------
async def test_new_chat_members_reach_the_welcome(fake: FakeTelegram, tmp_path: Path) -> None:
    driver = TelegramDriver(fake)
    group = Chat("group", "5006")
    async with running(driver, tmp_path, welcome={"messages": {}, "default": "Welcome, {name}!"}):
        await fake.members_join(
            fake.group(driver.native(group)), fake.user(1010, "New", "Comer"), fake.me | {}
        )
        [reply] = await driver.sent(group, 1)
    assert "Welcome, New Comer!" in reply.text


async def test_trust_group_admins_from_get_chat_member(fake: FakeTelegram, tmp_path: Path) -> None:
    driver = TelegramDriver(fake)
    group, other = Chat("group", "5007"), Chat("group", "5008")
    async with running(
        driver,
        tmp_path,
        bot={"trust_group_admins": True, "reply_with_mention": False},
        personas={"pirate": "Arr."},
    ) as bot:
        state = bot.storage.chat_state
        await driver.say(group, "/persona pirate", sender="1011", role="member")
        [refused] = await driver.sent(group, 1)
        await driver.say(group, "/persona pirate", sender="1011", role="creator")
        await driver.sent(group, 2)
        owner_set = state.overrides("telegram", driver.chat_id(group))["persona"].value
        await driver.say(other, "/persona pirate", sender="1011", role="member")
        [refused_elsewhere] = await driver.sent(other, 1)
    assert "admins only" in refused.text and "admins only" in refused_elsewhere.text
    assert owner_set == "pirate"
    asked = [(p["chat_id"], p["user_id"]) for m, p in fake.calls if m == "getChatMember"]
    assert len(asked) == 3  # commands only, and each time (a demoted admin loses it at once)


# -- webhook mode ------------------------------------------------------------------------------
async def test_webhook_mode_through_the_http_channels_port_with_its_secret(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    import aiohttp

    from chatfn.runtime.channel_registry import find_channels
    from tests.channels.telegram.telegram_driver import registry

    port = free_port()
    driver = TelegramDriver(
        fake,
        mode="webhook",
        webhook_url=f"http://127.0.0.1:{port}/telegram/hook",
        secret_token="s3cret-Token_1",
    )
    from chatfn.runtime.settings import parse_settings

    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'w.db'}"},
            "plugins": {"paths": []},
            "channels": {"telegram": driver.channel_settings(), "http": {"port": port}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=registry(),
        model=HeldModel(echo_model, gate := asyncio.Event()),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    try:
        # As `--channel http --channel telegram`: both built, then started.
        channel_task = asyncio.create_task(asyncio.sleep(0))
        driver.channel = (
            find_channels().get("telegram").build(bot.channel_host, settings.channels.telegram)
        )
        await http.start()
        await channel_task
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        assert fake.webhook == {
            "url": f"http://127.0.0.1:{port}/telegram/hook",
            "secret_token": "s3cret-Token_1",
        }
        await fake.message(fake.private(1020), "via webhook")
        [sent] = await fake.wait_sent(1020, 1)
        assert sent.text == "echo: via webhook" and fake.webhook_posts == [200]
        # A message waiting behind its chat's turn is answered 200 once it is stored, not
        # before: until then Telegram would still send it again.
        await fake.message(fake.private(1021), "hold on")
        queued = asyncio.create_task(fake.message(fake.private(1021), "queued behind it"))
        inbound = driver.channel.inbound
        await until(lambda: len(inbound.seen) == 3, 30.0)  # taken
        # An update the bot has nothing to do with, answered 200 at once, after it: the
        # queued one's answer, had it been given on taking, would have come first.
        await fake.push({})
        assert not queued.done() and fake.webhook_posts == [200, 200, 200]
        gate.set()
        await queued
        assert fake.webhook_posts == [200, 200, 200, 200]
        assert [s.text for s in await fake.wait_sent(1021, 2)][-1] == "echo: queued behind it"
        async with aiohttp.ClientSession() as session:
            for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
                async with session.post(
                    f"http://127.0.0.1:{port}/telegram/hook",
                    json={"update_id": 99},
                    headers=headers,
                ) as r:
                    assert r.status == 403
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()


# -- settings, probe, parsing ------------------------------------------------------------------
def test_settings_errors_name_the_key() -> None:
    from chatfn.runtime.settings import ConfigError, parse_settings

    with pytest.raises(ConfigError, match=r"channels\.telegram.*webhook_url"):
        parse_settings({"channels": {"telegram": {"token": "1:a", "mode": "webhook"}}})
    with pytest.raises(ConfigError, match=r"channels\.telegram\.base_url: .*http\(s\) URL"):
        parse_settings({"channels": {"telegram": {"token": "1:a", "base_url": "api.telegram.org"}}})
    with pytest.raises(ConfigError, match=r"channels\.telegram\.mode"):
        parse_settings({"channels": {"telegram": {"mode": "push"}}})
    with pytest.raises(ConfigError, match=r"channels\.telegram\.secret_token"):
        parse_settings({"channels": {"telegram": {"secret_token": "has space"}}})
    ok = parse_settings({"channels": {"telegram": {"base_url": "http://127.0.0.1:8081/"}}})
    assert ok.channels.telegram.base_url == "http://127.0.0.1:8081"


async def test_check_probe_offline_and_online(fake: FakeTelegram) -> None:
    from chatfn.channels.telegram import SPEC, TelegramSettings

    assert SPEC.check is not None
    [no_token] = await SPEC.check(TelegramSettings(), False)
    assert no_token.status == "fail" and "channels.telegram.token" in no_token.detail
    good = TelegramSettings(token=fake.token, base_url=fake.base_url)
    probes = await SPEC.check(good, True)
    assert [p.status for p in probes] == ["ok", "ok"]
    assert f"@{BOT_USERNAME} (id {BOT_ID})" in probes[-1].detail
    dead = TelegramSettings(token="1:dead", base_url=fake.base_url)
    [_, refused] = await SPEC.check(dead, True)
    assert refused.status == "fail" and "refused channels.telegram.token" in refused.detail
    assert "1:dead" not in refused.detail  # the token is never shown


async def test_a_dead_token_is_one_clear_log_line(fake: FakeTelegram, tmp_path: Path) -> None:
    from loguru import logger

    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(str(m)),
        level="WARNING",
        filter=lambda r: r["name"].startswith("chatfn.channels.telegram"),
    )
    driver = TelegramDriver(fake)
    driver.settings["token"] = "1:dead"
    try:
        from chatfn.runtime.settings import parse_settings

        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'd.db'}"},
                "plugins": {"paths": []},
                "channels": {"telegram": driver.channel_settings()},
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, load_plugins=False, builtins=False)
        from chatfn.channels.telegram import SPEC

        channel = SPEC.build(bot.channel_host, settings.channels.telegram)
        task = asyncio.create_task(channel.run())
        await until(lambda: lines, 30.0)
        await channel.stop()
        await task
        await bot.aclose()
    finally:
        logger.remove(sink)
    assert len(lines) == 1 and "Telegram refused channels.telegram.token" in lines[0]
    assert "1:dead" not in lines[0]


async def test_telegram_and_onebot_in_one_process(fake: FakeTelegram, tmp_path: Path) -> None:
    """Two platforms on one bot: each message is answered on the platform it came from."""
    from chatfn.runtime.settings import parse_settings
    from chatfn.testing import ScriptedModel
    from tests.channels.onebot.test_contract_onebot import OneBotDriver
    from tests.channels.telegram.telegram_driver import echo_model, registry

    telegram, onebot = TelegramDriver(fake), OneBotDriver()
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'two.db'}"},
            "plugins": {"paths": []},
            "channels": {
                "telegram": telegram.channel_settings(),
                "onebot": onebot.channel_settings(),
            },
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([echo_model], repeat_last=True)
    bot = Bot(settings, registry=registry(), model=model, load_plugins=False)
    try:
        await telegram.attach(bot.channel_host, settings.channels.telegram)
        await onebot.attach(bot.channel_host, settings.channels.onebot)
        await bot.start()
        same = Chat("private", "3001")  # the same native id on both platforms
        await telegram.say(same, "from telegram")
        await onebot.say(same, "from qq")
        [on_telegram] = await telegram.sent(same, 1)
        [on_qq] = await onebot.sent(same, 1)
        await bot.send(OutgoingMessage("telegram", "private:3001", "a reminder"))
        reminded = await telegram.sent(same, 2)
    finally:
        await telegram.detach()
        await onebot.detach()
        await bot.aclose()
    assert on_telegram.text == "echo: from telegram" and on_qq.text == "echo: from qq"
    assert reminded[-1].text == "a reminder"


async def test_check_warns_about_a_webhook_telegram_cannot_reach() -> None:
    from chatfn.channels.telegram import SPEC, TelegramSettings

    assert SPEC.check is not None
    plain_http = TelegramSettings(token="1:a", mode="webhook", webhook_url="http://bot.example/h")
    warnings = [p.detail for p in await SPEC.check(plain_http, False) if p.status == "warn"]
    assert any("only to https URLs" in w for w in warnings)
    assert any("secret_token is not set" in w for w in warnings)
    fine = TelegramSettings(
        token="1:a", mode="webhook", webhook_url="https://bot.example/h", secret_token="x"
    )
    assert [p.status for p in await SPEC.check(fine, False)] == ["ok"]


async def test_a_429_longer_than_max_retry_after_waits_in_the_outbox_without_repeating(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    """The first parts went out; the part Telegram refused for longer than max_retry_after is
    owed with the parts after it, and goes out later without the ones sent already."""
    driver = TelegramDriver(fake, max_retry_after=0.5)
    async with running(driver, tmp_path) as bot:
        assert driver.channel is not None
        sender = driver.channel.sender
        text = "\n\n".join(f"part {i} " + "x" * 3000 for i in range(3))
        calls = 0
        original = fake._took

        async def took(method: str, params: dict[str, Any], chat_id: Any, raw: str) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:  # the second part: flood control for longer than we wait inline
                return web.json_response(
                    {"ok": False, "error_code": 429, "description": "Too Many Requests",
                     "parameters": {"retry_after": 1}},
                    status=429,
                )  # fmt: skip
            return await original(method, params, chat_id, raw)

        fake._took = took  # type: ignore[method-assign]
        assert len(sender.split(text)) == 3
        await bot.send(OutgoingMessage("telegram", "private:1030", text))
        sent = await fake.wait_sent(1030, 3, timeout=30)
    assert [s.text.split(" ", 2)[:2] for s in sent] == [["part", "0"], ["part", "1"], ["part", "2"]]


async def test_a_missing_token_is_a_config_error(tmp_path: Path) -> None:
    from chatfn.channels.telegram import SPEC
    from chatfn.common.config import ConfigError
    from chatfn.runtime.settings import parse_settings

    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'n.db'}"}, "channels": {"telegram": {}}},
        base_dir=tmp_path,
    )
    bot = Bot(settings, load_plugins=False, builtins=False)
    try:
        with pytest.raises(ConfigError, match=r"channels\.telegram\.token is not set"):
            SPEC.build(bot.channel_host)
    finally:
        await bot.aclose()


async def test_a_bots_message_is_marked_and_answered_only_where_a_rule_allows(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    """Issue 40 §3: from.is_bot marks the sender (IncomingMessage.sender_is_bot); another
    bot's message is stored and not answered (ignored: bot_sender) unless the chat's `chats:`
    rule sets answer_bots."""
    driver = TelegramDriver(fake)
    quiet, open_ = fake.group(-1001000000001), fake.group(-1001000000002)
    robot = dict(fake.user(4242, "Robo"), is_bot=True)
    mention = [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]
    rules = [{"match": {"chat_id": "group:-1001000000002"}, "answer_bots": True}]
    config: dict[str, Any] = {"bot": {"reply_with_mention": False}, "chats": rules}
    async with running(driver, tmp_path, **config) as bot:
        for group in (quiet, open_):
            await fake.message(group, f"@{BOT_USERNAME} ping", sender=robot, entities=mention)
        [reply] = await fake.wait_sent(open_["id"], 1)
        await until(lambda: bot.metrics.message_fates.values.get(("ignored",)) == 1)
        rows = await bot.api_host.history("telegram", "group:-1001000000001", 10)
        fate = await bot.fates.of(rows[0].id)
    assert reply.text == "echo: ping"
    assert [(r.sender_id, r.text) for r in rows] == [("4242", "ping")]
    assert fate is not None and (fate.fate, fate.detail) == ("ignored", "bot_sender")
    assert not [s for s in fake.sent if s.chat_id == quiet["id"]]
