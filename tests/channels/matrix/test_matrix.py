"""The Matrix channel's own cases against the session's real Synapse (the shared contract is
test_contract_matrix.py): transaction ids after a crash, resuming from the stored sync
position (with a cut-short timeline read back), pills and reply fallbacks as clients write
them, power levels, a reply far over one event's size, authenticated media, a refused token
and the `--online` probe, a password login."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nio")

from loguru import logger  # noqa: E402

from chatfn.channels.kit import REFUSED_RETRY  # noqa: E402
from chatfn.channels.matrix import SPEC  # noqa: E402
from chatfn.channels.matrix.send import EVENT_BUDGET  # noqa: E402
from chatfn.channels.matrix.settings import MatrixSettings  # noqa: E402
from function_calls import FunctionResult, MessageContext, tool_function  # noqa: E402
from tests.channels.contract import PNG, Chat, _unmark_last, contract_registry  # noqa: E402
from tests.channels.matrix.matrix_driver import BOT_NAME, MatrixDriver, running  # noqa: E402
from tests.channels.matrix.matrix_proxy import MatrixProxy  # noqa: E402
from tests.channels.matrix.synapse_server import Synapse  # noqa: E402
from tests.kit import until  # noqa: E402

pytestmark = pytest.mark.services

# A reply far over one event: CJK is 3 bytes a character in UTF-8, and is in the event twice
# (`body` and `formatted_body`), so the byte budget, not the character limit, cuts it.
HUGE = "\n\n".join(f"第{n}段 " + "汉字测试" * 900 for n in range(1, 9))


@pytest.fixture
async def driver(synapse: Synapse, tmp_path: Path) -> AsyncIterator[MatrixDriver]:
    async with MatrixProxy(synapse.url) as proxy:
        made = await MatrixDriver.create(synapse, proxy, tmp_path / "matrix-store")
        yield made
        await made.close()


async def _texts(driver: MatrixDriver, chat: Chat, count: int) -> list[str]:
    return [s.text for s in await driver.sent(chat, count)]


async def test_a_crash_after_the_send_resends_the_same_transaction_and_synapse_keeps_one(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "2001")
    async with running(driver, tmp_path) as bot:
        await driver.say(chat, "hello")
        await driver.sent(chat, 1)
        [(room, txn)] = driver.proxy.sends
        assert room == driver.platform_id(chat) and txn.startswith("chatfn-")
        await bot.outbox.flush_marks()  # the delivery mark written, then undone: a crash
        await _unmark_last(bot, "matrix", driver.chat_id(chat))
    async with running(driver, tmp_path):  # the row is owed: sent again, same transaction
        await until(lambda: driver.proxy.txns[txn] >= 2, 15, "the owed row was not sent again")
        await driver.say(chat, "later")
        assert await _texts(driver, chat, 2) == ["echo: hello", "echo: later"]
    assert [t for _r, t in driver.proxy.sends].count(txn) == 2


async def test_a_restart_answers_what_came_meanwhile_once_even_past_the_timeline_limit(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "2002")
    async with running(driver, tmp_path, channel={"timeline_limit": 2}):
        await driver.say(chat, "one")
        await driver.sent(chat, 1)
    store = json.loads(next((tmp_path / "matrix-store").glob("*.json")).read_text())
    assert store["since"]
    # The DM invite (is_direct) is kept in the bot's m.direct, as clients keep it.
    assert driver.bot is not None
    direct = await driver.api(
        driver.bot.access_token, "GET", f"/user/{driver.bot_user}/account_data/m.direct"
    )
    assert driver.platform_id(chat) in direct[driver.user_of("2002")]
    for word in ("two", "three", "four", "five"):  # more than one sync's timeline holds
        await driver.say(chat, word)
    async with running(driver, tmp_path, channel={"timeline_limit": 2}):
        texts = await _texts(driver, chat, 5)
        assert texts == ["echo: one", "echo: two", "echo: three", "echo: four", "echo: five"]
        await driver.say(chat, "six")
        assert (await _texts(driver, chat, 6))[-1] == "echo: six"


async def test_failing_syncs_are_retried_with_backoff_and_one_warning(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "2007")
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING", format="{message}")
    try:
        async with running(driver, tmp_path) as bot:
            channel = driver.channel
            assert channel is not None
            await driver.say(chat, "before")
            await driver.sent(chat, 1)
            syncs = channel.syncs
            driver.proxy.fail_next("/sync", 2)
            driver.proxy.drop()  # the poll in flight ends: the next two syncs get 502s
            await driver.say(chat, "after")
            assert (await _texts(driver, chat, 2))[1] == "echo: after"
            assert driver.proxy.failed == 2 and channel.syncs > syncs
            assert bot is not None
    finally:
        logger.remove(sink)
    failed = [line for line in lines if "Matrix sync failed" in line]
    assert len(failed) == 1, lines  # one line for the outage, not one per try


async def test_a_long_rate_limit_leaves_the_reply_in_the_outbox_until_it_has_passed(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "2006")
    loop = asyncio.get_running_loop()
    async with running(driver, tmp_path, channel={"max_retry_after": 0.2}):
        await driver.room(chat)
        driver.proxy.rate_limit_next(driver.platform_id(chat), 1500)
        began = loop.time()
        await driver.say(chat, "slow")
        [reply] = await driver.sent(chat, 1)
        assert reply.text == "echo: slow" and loop.time() - began >= 1.5
        assert driver.proxy.limited == 1 and len(driver.proxy.sends) == 1


async def test_pills_legacy_names_reply_fallbacks_and_threads(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    group = Chat("group", "6001")
    bot_link = f'<a href="https://matrix.to/#/{driver.bot_user}">{BOT_NAME}</a>'
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        # A client without m.mentions that writes the name first.
        await driver.say_content(group, {"msgtype": "m.text", "body": f"{BOT_NAME}: legacy hi"})
        # A pill in the HTML only (the body holds the name as the pill's text).
        await driver.say_content(
            group,
            {
                "msgtype": "m.text",
                "body": f"pill hi {BOT_NAME}",
                "format": "org.matrix.custom.html",
                "formatted_body": f"pill hi {bot_link}",
            },
        )
        # m.mentions that names someone else: the name in the body is not a mention.
        await driver.say_content(
            group,
            {
                "msgtype": "m.text",
                "body": f"{BOT_NAME} is not meant",
                "m.mentions": {"user_ids": [driver.user_of("1002")]},
            },
        )
        first = await driver.sent(group, 2)
        assert [s.text for s in first] == ["echo: legacy hi", "echo: pill hi"]
        # A reply to the bot, with an old client's fallback quote: addressed to the bot, the
        # quote removed from the text and kept as the quote.
        said = await driver.say_content(
            group,
            {
                "msgtype": "m.text",
                "body": f"> <{driver.bot_user}> echo: legacy hi\n\nand more",
                "format": "org.matrix.custom.html",
                "formatted_body": "<mx-reply><blockquote>echo: legacy hi</blockquote></mx-reply>"
                "and more",
                "m.relates_to": {"m.in_reply_to": {"event_id": first[0].message_id}},
            },
        )
        texts = await _texts(driver, group, 3)
        # The model reads the quote as the bot notes it, and the new words: no fallback.
        assert texts[2] == "echo: (quoting: echo: legacy hi)\nand more"
        from sqlalchemy import select

        from chatfn.storage.models import messages_table as m

        def row() -> str:
            with bot.storage.engine.connect() as conn:
                return str(conn.execute(select(m.c.text).where(m.c.message_id == said)).scalar())

        assert await bot.storage.run(row) == "and more"
        # Said in a thread: the answer goes into the same thread.
        root = first[1].message_id
        await driver.say_content(
            group,
            {
                "msgtype": "m.text",
                "body": f"{BOT_NAME}: in a thread",
                "m.mentions": {"user_ids": [driver.bot_user]},
                "m.relates_to": {
                    "rel_type": "m.thread",
                    "event_id": root,
                    "is_falling_back": True,
                    "m.in_reply_to": {"event_id": root},
                },
            },
        )
        assert (await _texts(driver, group, 4))[3] == "echo: in a thread"
        relation = (await driver.events(group))[3]["content"]["m.relates_to"]
        assert relation["rel_type"] == "m.thread" and relation["event_id"] == root


async def test_power_levels_are_roles(driver: MatrixDriver, tmp_path: Path) -> None:
    group = Chat("group", "6002")
    async with running(driver, tmp_path, bot={"reply_with_mention": False}):
        await driver.room(group)
        await driver.set_level(group, driver.user_of("1002"), 100)
        await driver.set_level(group, driver.user_of("1011"), 49)
        await driver.say(group, "sync", mention=True)  # after the power levels: seen by then
        await driver.sent(group, 1)
        channel = driver.channel
        assert channel is not None
        room = driver.platform_id(group)
        assert channel.roles(room, driver.user_of("owner")) == ["owner"]  # the v12 creator
        assert channel.roles(room, driver.user_of("1002")) == ["owner"]
        assert channel.roles(room, driver.user_of("1011")) == []
        assert channel.roles(room, driver.user_of("1001")) == []


async def test_a_reply_over_one_events_size_is_split_and_every_part_accepted(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    registry = contract_registry()
    with registry.collecting():

        @tool_function(name="huge", description="A reply over one Matrix event.")
        async def huge(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[HUGE])

    chat = Chat("private", "2003")
    # The channel's own default limit (the driver lowers it for the contract's split test).
    async with running(driver, tmp_path, registry, channel={"max_message_length": 16000}):
        await driver.say(chat, "/huge")
        found: list[dict[str, Any]] = []

        async def all_parts() -> bool:  # the last part holds the 8th paragraph
            nonlocal found
            found = await driver.events(chat)
            return bool(found) and "第8段" in str(found[-1])

        await until(all_parts, 20, lambda: f"{len(found)} parts so far", interval=0.1)
    assert len(found) >= 3
    for event in found:
        content = event["content"]
        assert (
            len(content["body"].encode()) + len(content["formatted_body"].encode()) <= EVENT_BUDGET
        )
    assert "".join(e["content"]["body"] for e in found).replace("\n", "") == HUGE.replace("\n", "")


async def test_images_use_authenticated_media_both_ways(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "2004")
    async with running(driver, tmp_path) as bot:
        said = await driver.say(chat, "look", image=PNG)
        await driver.sent(chat, 1)
        downloads = [(p, b) for m, p, b in driver.proxy.requests if "/download/" in p]
        assert downloads and all(
            p.startswith("/_matrix/client/v1/media/download/") and bearer for p, bearer in downloads
        )
        from sqlalchemy import select

        from chatfn.storage.models import messages_table as m

        def row() -> str:
            with bot.storage.engine.connect() as conn:
                return str(conn.execute(select(m.c.text).where(m.c.message_id == said)).scalar())

        assert "look" in (text := await bot.storage.run(row)) and "image/png" in text
        await driver.say(chat, "/picture")
        replies = await driver.sent(chat, 2)
        assert replies[-1].images == [PNG] and replies[-1].text == "a picture"


async def test_a_refused_token_is_one_error_line_and_a_fail_in_the_probe(
    driver: MatrixDriver, tmp_path: Path
) -> None:
    good = MatrixSettings.model_validate(driver.channel_settings())
    probes = await SPEC.check(good, True)
    assert probes[-1].status == "ok" and driver.bot_user in probes[-1].detail
    assert ("GET", "/_matrix/client/v3/account/whoami", True) in driver.proxy.requests
    bad = good.model_copy(update={"access_token": type(good.access_token)("syt_dead")})
    probes = await SPEC.check(bad, True)
    assert probes[-1].status == "fail" and "access_token" in probes[-1].detail
    assert "M_UNKNOWN_TOKEN" in probes[-1].detail

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="ERROR", format="{message}")
    try:
        from chatfn.runtime.bot import Bot
        from chatfn.runtime.settings import parse_settings
        from chatfn.testing import ScriptedModel

        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'dead.db'}"},
                "plugins": {"paths": []},
                "channels": {"matrix": {**driver.channel_settings(), "access_token": "syt_dead"}},
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, model=ScriptedModel([]), load_plugins=False)
        channel = SPEC.build(bot.channel_host, settings.channels.matrix)
        paused: list[float] = []
        pause = channel.pause

        async def record_pause(seconds: float) -> bool:
            paused.append(seconds)
            return await pause(seconds)

        channel.pause = record_pause  # type: ignore[method-assign]
        task = asyncio.create_task(channel.run())
        await until(lambda: lines and paused, 10, "no refusal logged and waited on")
        # Unchecked, the backoff would try again after 0.4-0.6 s: a refused token waits
        # REFUSED_RETRY (a minute) instead, so nothing more comes meanwhile.
        assert paused == [REFUSED_RETRY]
        await channel.stop()
        await task
        await bot.aclose()
    finally:
        logger.remove(sink)
    refused = [line for line in lines if "access_token" in line]
    assert len(lines) == 1 and len(refused) == 1 and "refused" in refused[0], lines
    whoami = ("GET", "/_matrix/client/v3/account/whoami", True)
    assert driver.proxy.requests.count(whoami) == 3  # the two probes, then the channel once


async def test_a_password_login_keeps_its_token_and_device(
    driver: MatrixDriver, synapse: Synapse, tmp_path: Path
) -> None:
    assert driver.bot is not None
    password_settings = {
        "access_token": None,
        "password": driver.bot.password,
        "device_id": "CHATFNTEST",
    }
    chat = Chat("private", "2005")
    async with running(driver, tmp_path, channel=password_settings):
        await driver.say(chat, "hi")
        await driver.sent(chat, 1)
    store = json.loads(next((tmp_path / "matrix-store").glob("*.json")).read_text())
    assert store["device_id"] == "CHATFNTEST" and store["access_token"]
    async with running(driver, tmp_path, channel=password_settings):
        await driver.say(chat, "again")
        assert await _texts(driver, chat, 2) == ["echo: hi", "echo: again"]
    logins = [r for r in driver.proxy.requests if r[1].endswith("/login")]
    assert len(logins) == 1  # the second start used the kept token
