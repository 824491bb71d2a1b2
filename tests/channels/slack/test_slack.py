"""The Slack channel's own cases (the shared contract runs in test_contract_slack.py): the
Events API route (signatures, the url_verification challenge, retries), threads, the same
message as app_mention and message.*, Socket Mode resends and reconnects, mrkdwn escaping,
images in with the bot token, workspace roles, a dead token, the settings and the probe.
Everything through the real slack_sdk client against tests/channels/slack/slack_fake.py."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("slack_sdk")

import aiohttp  # noqa: E402
from loguru import logger  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from chatfn.channels.slack import SPEC, check  # noqa: E402
from chatfn.channels.slack.parse import parse_chat_id, read_text  # noqa: E402
from chatfn.channels.slack.settings import SlackSettings  # noqa: E402
from function_calls import FunctionResult, MessageContext, tool_function  # noqa: E402
from function_calls.registry import Registry  # noqa: E402
from tests.channels.contract import PNG, contract_registry  # noqa: E402
from tests.channels.held_model import HeldModel, broker_away  # noqa: E402
from tests.channels.slack.slack_driver import SlackDriver, running  # noqa: E402
from tests.channels.slack.slack_fake import BOT_ID, BOT_USER, FakeSlack, read_mrkdwn  # noqa: E402
from tests.kit import until  # noqa: E402

EVENTS = json.loads((Path(__file__).parents[2] / "fixtures/slack/events.json").read_text())
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def replies(fake: FakeSlack, channel: str) -> list[str]:
    return [read_mrkdwn(p.text)[0] for p in fake.sent_to(channel)]


# -- pure parts ------------------------------------------------------------------------------
def test_chat_ids_round_trip_and_bad_ones_are_named() -> None:
    for chat_id in ("private:D024BE91L", "group:C123ABC456", "group:C1:thread:1515449522.000016"):
        assert parse_chat_id(chat_id).key == chat_id
    ref = parse_chat_id("group:C123:thread:1515449522.000016")
    assert (ref.target, ref.thread, ref.is_group) == ("C123", "1515449522.000016", True)
    for bad in ("C123", "group:c123", "group:C1:topic:1", "private:D1:thread:x", "dm:D1"):
        with pytest.raises(ValueError, match="not a Slack chat id"):
            parse_chat_id(bad)


def test_incoming_markup_is_read_and_the_bots_mention_removed() -> None:
    said, at = read_text(
        "<@UBOT> ask <@U2|ann> in <#C1|general> about <https://x.org/a?b=1&amp;c|this> "
        "&amp; <!here>: 1 &lt; 2 &gt; 0",
        "UBOT",
    )
    assert at
    assert said == "ask @ann in #general about this (https://x.org/a?b=1&c) & @here: 1 < 2 > 0"
    assert read_text("hi <@UOTHER>", "UBOT") == ("hi @UOTHER", False)
    assert read_text("<https://a.b/>", "UBOT") == ("https://a.b/", False)


def test_settings_name_the_key_and_what_was_expected() -> None:
    with pytest.raises(ValidationError, match="xapp-"):
        SlackSettings(bot_token="xoxb-1", app_token="xoxb-2")
    with pytest.raises(ValidationError, match="bot token"):
        SlackSettings(bot_token="xapp-1")
    with pytest.raises(ValidationError, match="not both"):
        SlackSettings(bot_token="xoxb-1", app_token="xapp-1", signing_secret="s")
    with pytest.raises(ValidationError, match="http"):
        SlackSettings(api_base="slack.com/api")
    with pytest.raises(ValidationError, match="max_message_length"):
        SlackSettings(max_message_length=40001)
    assert SlackSettings(api_base="http://127.0.0.1:9/api/").api_base == "http://127.0.0.1:9/api"


async def test_probe_offline_and_online(fake: FakeSlack) -> None:
    [missing] = await check(SlackSettings(), online=False)
    assert missing.status == "fail" and "bot_token" in missing.detail
    [no_way_in] = await check(SlackSettings(bot_token="xoxb-1"), online=False)
    assert no_way_in.status == "fail" and "app_token" in no_way_in.detail
    good = SlackSettings(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
    offline, online, socket_mode = await check(good, online=True)
    assert offline.status == "ok" and "Socket Mode" in offline.detail
    assert online.status == "ok" and "chatfnbot" in online.detail and BOT_USER in online.detail
    assert socket_mode.status == "ok"
    dead = good.model_copy(update={"bot_token": SlackSettings(bot_token="xoxb-dead").bot_token})
    _, refused, _ = await check(dead, online=True)
    assert refused.status == "fail"
    assert refused.detail == (
        "Slack refused channels.slack.bot_token (auth.test: invalid_auth): check the app's Bot "
        "User OAuth Token (xoxb-...)"
    )
    dead_app = good.model_copy(update={"app_token": SlackSettings(app_token="xapp-x").app_token})
    *_, refused_app = await check(dead_app, online=True)
    assert refused_app.detail == "Slack refused channels.slack.app_token (invalid_auth)"
    events = SlackSettings(bot_token=fake.bot_token, signing_secret="s", api_base=fake.api_base)
    assert [p.status for p in await check(events, online=True)] == ["ok", "ok"]
    gone = good.model_copy(update={"api_base": "http://127.0.0.1:9/api"})
    _, unreachable, _ = await check(gone, online=True)
    assert unreachable.status == "fail" and "not reachable" in unreachable.detail


# -- Socket Mode -------------------------------------------------------------------------------
async def test_a_mention_sent_as_app_mention_and_message_is_answered_once(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path, bot={"reply_with_mention": False}):
        fake.user("U7", "Ann")
        event = fake.message_event("C42", "U7", f"<@{BOT_USER}> one")
        mention = dict(event, type="app_mention")
        await fake.push(fake.callback(mention))
        await fake.push(fake.callback(event))
        await fake.push(fake.callback(fake.message_event("C42", "U7", f"<@{BOT_USER}> two")))
        await fake.wait_sent("C42", 2)
        await fake.wait_for(lambda: len(fake.acked) == 3)
        assert replies(fake, "C42") == ["echo: one", "echo: two"]


async def test_an_unacknowledged_envelope_sent_again_is_handled_once(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path):
        fake.user("U8", "Bo")
        payload = fake.callback(fake.message_event("D8", "U8", "hello"))
        await fake.push(payload)
        await fake.push(payload)  # Slack's retry: the same event_id in a new envelope
        await fake.wait_sent("D8", 1)
        await fake.push(fake.callback(fake.message_event("D8", "U8", "next")))
        await fake.wait_sent("D8", 2)
        assert replies(fake, "D8") == ["echo: hello", "echo: next"]


async def test_an_envelope_is_acknowledged_only_once_its_message_is_stored(
    fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatfn.channels.slack import channel as slack_channel
    from tests.channels.contract import _echo

    monkeypatch.setattr(slack_channel, "ACK_WAIT", 30.0)  # a loaded machine: never given up here
    gate = asyncio.Event()
    driver = SlackDriver(fake)
    async with running(driver, tmp_path, model=HeldModel(_echo, gate)):
        fake.user("U9", "Cy")
        first = await fake.push(fake.callback(fake.message_event("D9", "U9", "hold on")))
        await fake.wait_for(lambda: first in fake.acked)  # stored: its turn waits for the model
        queued = await fake.push(fake.callback(fake.message_event("D9", "U9", "queued behind")))
        # The bot's own message after it, which the channel acknowledges as soon as it reads
        # it: read in order, the queued one was read (and taken) before.
        own = await fake.push(fake.callback(fake.message_event("D99", BOT_USER, "own")))
        await fake.wait_for(lambda: own in fake.acked)
        assert queued not in fake.acked  # taken, waiting for the chat's turn, not stored
        gate.set()
        await fake.wait_for(lambda: queued in fake.acked)
        await fake.wait_sent("D9", 2)
        assert replies(fake, "D9") == ["echo: hold on", "echo: queued behind"]


async def test_a_message_taken_but_not_stored_when_the_bot_stops_comes_again(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """Acknowledged as soon as it was read, the second message was gone for good: Slack had
    let go of it and the bot had not stored it."""
    from tests.channels.contract import _echo

    driver = SlackDriver(fake)
    async with running(driver, tmp_path, model=HeldModel(_echo, asyncio.Event())):
        fake.user("U10", "Di")
        first = await fake.push(fake.callback(fake.message_event("D10", "U10", "hold on")))
        await fake.wait_for(lambda: first in fake.acked)
        queued = await fake.push(fake.callback(fake.message_event("D10", "U10", "queued behind")))
        # The bot's own message after it, which the channel acknowledges as soon as it reads
        # it: read in order, the queued one was read (and taken) before.
        own = await fake.push(fake.callback(fake.message_event("D99", BOT_USER, "own")))
        await fake.wait_for(lambda: own in fake.acked)
    assert queued not in fake.acked
    # The next connection gets the unacknowledged envelope again (retry_attempt 1).
    async with running(driver, tmp_path) as bot:
        await fake.wait_sent("D10", 1)
        await fake.wait_for(lambda: queued in fake.acked)
        rows = await bot.storage.run(stored_texts, bot, "private:D10")
    assert replies(fake, "D10") == ["echo: queued behind"]
    assert rows == ["hold on", "queued behind"]


async def test_an_event_whose_handling_failed_before_the_store_is_not_acknowledged(
    fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host.handle` raising before the message is stored (a cluster gateway whose broker is
    away; `Bot.handle` stands in for it): no ack, and Slack's resend is taken again."""
    from chatfn.channels import intake

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.3)
    driver = SlackDriver(fake)
    async with running(driver, tmp_path) as bot:
        fake.user("U12", "Fa")
        tries = broker_away(bot, monkeypatch, {"once": 1})
        envelope = await fake.push(fake.callback(fake.message_event("D12", "U12", "once")))
        await until(lambda: tries, 15)
        # The bot's own message after it, which the channel acknowledges as soon as it reads
        # it: read in order, the failed one was read before.
        own = await fake.push(fake.callback(fake.message_event("D99", BOT_USER, "own")))
        await fake.wait_for(lambda: own in fake.acked)
        assert envelope not in fake.acked
        await fake.drop()  # the next connection gets the unacknowledged envelope again
        await fake.wait_sent("D12", 1)
        await fake.wait_for(lambda: envelope in fake.acked)
    assert replies(fake, "D12") == ["echo: once"] and tries == ["once", "once"]


def stored_texts(bot: Any, chat_id: str) -> list[str]:
    """The chat's stored user messages, oldest first (run on a storage thread)."""
    from sqlalchemy import select

    from chatfn.storage.models import messages_table as m

    with bot.storage.engine.connect() as conn:
        return list(
            conn.execute(
                select(m.c.text)
                .where(m.c.platform == "slack", m.c.chat_id == chat_id, m.c.role == "user")
                .order_by(m.c.id)
            ).scalars()
        )


async def test_a_reply_in_a_thread_stays_in_it_and_the_thread_is_its_own_chat(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        fake.user("U9", "Cy")
        parent = fake.message_event("C77", "U9", f"<@{BOT_USER}> top")
        await fake.push(fake.callback(parent))
        await fake.wait_sent("C77", 1)
        threaded = fake.message_event(
            "C77", "U9", f"<@{BOT_USER}> inside", thread_ts=str(parent["ts"])
        )
        await fake.push(fake.callback(threaded))
        top, inner = await fake.wait_sent("C77", 2)
        assert top.thread_ts is None and inner.thread_ts == parent["ts"]
        assert read_mrkdwn(inner.text)[0] == "echo: inside"
        history = await bot.api_host.history("slack", f"group:C77:thread:{parent['ts']}", 10)
        assert [h.text for h in history if h.role == "user"] == ["inside"]


async def test_reply_with_quote_answers_in_a_thread_under_the_message(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path, bot={"reply_with_quote": True}):
        fake.user("U10", "Di")
        event = fake.message_event("C78", "U10", f"<@{BOT_USER}> hi")
        await fake.push(fake.callback(event))
        [sent] = await fake.wait_sent("C78", 1)
        assert sent.thread_ts == event["ts"] and sent.text.startswith("<@U10> ")


async def test_mrkdwn_escapes_and_long_replies_split(fake: FakeSlack, tmp_path: Path) -> None:
    registry = Registry()
    with registry.collecting():

        @tool_function(name="angle", description="Text Slack would read as markup.")
        async def angle(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["if a<b & c>d then <@U1> <!channel> **ok**"])

        @tool_function(name="long", description="A reply over the limit.")
        async def long(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(
                messages=["\n\n".join(f"para {n} " + "x" * 150 for n in range(8))]
            )

    driver = SlackDriver(fake, max_message_length=400)
    async with running(driver, tmp_path, registry=registry):
        fake.user("U11", "Ed")
        await fake.push(fake.callback(fake.message_event("D11", "U11", "/angle")))
        [sent] = await fake.wait_sent("D11", 1)
        assert sent.text == "if a&lt;b &amp; c&gt;d then &lt;@U1&gt; &lt;!channel&gt; *ok*"
        await fake.push(fake.callback(fake.message_event("D11", "U11", "/long")))
        parts = await fake.wait_for(
            lambda: (got := fake.sent_to("D11")[1:]) and "para 7" in got[-1].text and got
        )
        assert len(parts) >= 3 and all(len(p.text) <= 400 for p in parts)
        assert "\n\n".join(p.text for p in parts).count("para ") == 8


async def test_images_in_use_the_bot_token_and_images_out_are_uploaded(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path) as bot:
        fake.user("U12", "Flo")
        file = fake.add_file(PNG)
        event = fake.message_event("D12", "U12", "", files=[file])
        await fake.push(fake.callback(event))
        await fake.wait_sent("D12", 1)
        history = await bot.api_host.history("slack", "private:D12", 10)
        assert "[image: " in history[0].text
        # A URL at another host never gets the token.
        stranger = dict(file, url_private="https://evil.example/x.png", url_private_download=None)
        await fake.push(fake.callback(fake.message_event("D12", "U12", "see", files=[stranger])))
        await fake.wait_sent("D12", 2)
        history = await bot.api_host.history("slack", "private:D12", 10)
        assert [h.text for h in history if h.role == "user"][-1] == "see"
        await fake.push(fake.callback(fake.message_event("D12", "U12", "/picture")))
        sent = await fake.wait_sent("D12", 3)
        assert sent[-1].files == [PNG] and read_mrkdwn(sent[-1].text)[0] == "a picture"
        assert {"files.getUploadURLExternal", "files.completeUploadExternal"} <= set(fake.calls)


async def test_workspace_owner_is_reported_as_owner(fake: FakeSlack, tmp_path: Path) -> None:
    driver = SlackDriver(fake)
    async with running(
        driver, tmp_path, bot={"trust_group_admins": True}, personas={"pirate": "Arr."}
    ) as bot:
        fake.user("U13", "Gus", is_owner=True, is_primary_owner=True)
        text = f"<@{BOT_USER}> /persona pirate"
        await fake.push(fake.callback(fake.message_event("C13", "U13", text)))
        await fake.wait_sent("C13", 1)
        state = bot.storage.chat_state
        assert state.overrides("slack", "group:C13")["persona"].value == "pirate"


async def test_reconnects_with_backoff_and_after_a_disconnect_envelope(
    fake: FakeSlack, tmp_path: Path
) -> None:
    driver = SlackDriver(fake)
    async with running(driver, tmp_path):
        fake.user("U14", "Hal")
        await fake.disconnect_warning()  # refresh_requested: a new link at once
        await fake.wait_for(lambda: fake.connections == 2)
        fake.link_down = True  # the WebSocket refused for a while
        began = time.monotonic()
        opened = fake.calls.count("apps.connections.open")
        await fake.drop()
        await fake.wait_for(lambda: fake.calls.count("apps.connections.open") >= opened + 2)
        fake.link_down = False
        await fake.push(fake.callback(fake.message_event("D14", "U14", "back")))
        await fake.wait_sent("D14", 1, timeout=20)
        # Waits of 0.5 then 1 s (jittered by 20 %) before the two opens after the drop.
        assert time.monotonic() - began >= 0.4 + 0.8
        assert replies(fake, "D14") == ["echo: back"]


async def test_a_dead_bot_token_is_one_clear_line(fake: FakeSlack, tmp_path: Path) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    driver = SlackDriver(fake, bot_token="xoxb-revoked")
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'dead.db'}"},
            "plugins": {"paths": []},
            "channels": {"slack": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    bot = Bot(settings, registry=contract_registry(), load_plugins=False)
    channel = SPEC.build(bot.channel_host, settings.channels.slack)
    channel_task = asyncio.create_task(channel.run())
    try:
        await fake.wait_for(lambda: "auth.test" in fake.calls)
        await until(lambda: any("Slack" in x for x in lines), 5, "no line about Slack's refusal")
        assert [x for x in lines if "Slack" in x] == [
            "Slack refused channels.slack.bot_token (auth.test: invalid_auth): check the "
            "app's Bot User OAuth Token (xoxb-...)"
        ]
        assert not channel_task.done()  # it tries again later (the token may be fixed)
    finally:
        logger.remove(sink)
        await channel.stop()
        await asyncio.gather(channel_task, return_exceptions=True)
        await bot.aclose()


# -- the Events API ----------------------------------------------------------------------------
def signed(body: bytes, secret: str = SECRET, at: int | None = None) -> dict[str, str]:
    """Slack's v0 signature (https://api.slack.com/authentication/verifying-requests-from-slack)."""
    stamp = str(at if at is not None else int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + digest.hexdigest(),
        "Content-Type": "application/json",
    }


async def test_the_events_api_on_the_http_channels_port(
    fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatfn.channels.slack import channel as slack_channel
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.channel_registry import find_channels
    from chatfn.runtime.settings import parse_settings
    from tests.channels.contract import _echo

    driver = SlackDriver(fake, app_token=None, signing_secret=SECRET)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'events.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False},
            "channels": {"slack": driver.channel_settings(), "http": {"port": 0}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=HeldModel(_echo, gate := asyncio.Event()),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    try:
        driver.channel = SPEC.build(bot.channel_host, settings.channels.slack)
        await http.start()  # on port 0: the URL is known once it listens
        url = f"http://127.0.0.1:{http.bound_port}/slack/events"
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        async with aiohttp.ClientSession() as session:

            async def post(payload: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
                body = json.dumps(payload).encode()
                async with session.post(url, data=body, headers=headers or signed(body)) as r:
                    return r.status, await r.json()

            challenge = EVENTS["url_verification"]
            assert await post(challenge) == (200, {"challenge": challenge["challenge"]})
            body = json.dumps(challenge).encode()
            stale = signed(body, at=int(time.time()) - 301)
            assert (await post(challenge, stale))[0] == 401
            assert (await post(challenge, signed(body, secret="wrong")))[0] == 401
            assert (await post(challenge, {"Content-Type": "application/json"}))[0] == 401

            fake.user("U061F7AUR", "Ann")
            mention = EVENTS["app_mention"]
            assert (await post(mention))[0] == 200
            retry = signed(json.dumps(mention).encode())
            retry.update({"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
            assert (await post(mention, retry))[0] == 200
            as_message = json.loads(json.dumps(mention))
            as_message["event"].update(type="message", channel_type="channel")
            as_message["event_id"] = "Ev0LAN699R"
            assert (await post(as_message))[0] == 200
            await post(EVENTS["message_in_thread"])
            await post(EVENTS["message_changed"])  # an edit: not a new message
            fake.user("U2147483697", "Bo")
            await post(EVENTS["message_im"])
            await fake.wait_sent("C123ABC456", 2)
            await fake.wait_sent("D024BE91L", 1)

            # A message waiting behind its chat's turn is not answered 200 before it is stored:
            # a 503 after ACK_WAIT (Slack sends it again), a 200 on the retry once it is.
            fake.user("U11", "Ed")
            assert (await post(fake.callback(fake.message_event("D11", "U11", "hold on"))))[
                0
            ] == 200
            queued = fake.callback(fake.message_event("D11", "U11", "queued behind"))
            monkeypatch.setattr(slack_channel, "ACK_WAIT", 0.3)
            assert (await post(queued))[0] == 503
            monkeypatch.setattr(slack_channel, "ACK_WAIT", 30.0)
            gate.set()
            retry = signed(json.dumps(queued).encode())
            retry.update({"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"})
            assert (await post(queued, retry))[0] == 200
            await fake.wait_sent("D11", 2)
        # The channel and its thread are two chats: answered concurrently, each where it was.
        assert {p.thread_ts: read_mrkdwn(p.text)[0] for p in fake.sent_to("C123ABC456")} == {
            None: "echo: what's the 2020 & 2021 <plan>?",
            "1515449522.000016": "echo: and in the thread?",
        }
        assert replies(fake, "D024BE91L") == ["echo: Hello hello can you hear me?"]
        assert replies(fake, "D11") == ["echo: hold on", "echo: queued behind"]
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()


async def test_sender_url_images_as_image_blocks_and_refusals(fake: FakeSlack) -> None:
    from chatfn.channels.slack.channel import web_client
    from chatfn.channels.slack.send import SlackSender
    from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage

    settings = SlackSettings(
        bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base, send_rate=0
    )
    client = web_client(settings, fake.bot_token)
    sender = SlackSender(client, settings)
    try:
        url = "https://example.com/cat.png"
        await sender.deliver(
            OutgoingMessage("slack", "group:C20:thread:1.000001", "look", images=[url], at="U5")
        )
        text, image = fake.sent_to("C20")
        assert text.text == "<@U5> look" and text.thread_ts == "1.000001"
        assert image.blocks == [{"type": "image", "image_url": url, "alt_text": "image"}]
        with pytest.raises(DeliveryRefused, match="not a Slack chat id"):
            await sender.deliver(OutgoingMessage("slack", "C20", "x"))
        with pytest.raises(DeliveryRefused, match="channel_not_found"):
            await sender.deliver(OutgoingMessage("slack", "group:X20", "x"))
        fake.rate_limited["C21"] = 120  # longer than max_retry_after: left in the outbox
        with pytest.raises(NotDelivered, match="wait 120 s"):
            await sender.deliver(OutgoingMessage("slack", "group:C21", "x"))
        sender.client.token = "xoxb-revoked"
        with pytest.raises(NotDelivered, match="invalid_auth"):
            await sender.deliver(OutgoingMessage("slack", "group:C22", "x"))
    finally:
        if client.session is not None:
            await client.session.close()


async def test_other_bots_are_marked_and_answered_only_where_a_rule_allows(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """Issue 40 §3: another app's message (subtype bot_message, bot_id, no user) comes in
    marked sender_is_bot and is not answered, except in a chat whose `chats:` rule sets
    answer_bots; the bot's own bot_message never comes in."""
    driver = SlackDriver(fake)
    rules = [{"match": {"chat_id": "group:C77"}, "answer_bots": True}]
    async with running(driver, tmp_path, bot={"reply_with_mention": False}, chats=rules) as bot:

        def from_bot(channel: str, text: str, bot_id: str = "B999") -> dict[str, Any]:
            event = fake.message_event(channel, "", f"<@{BOT_USER}> {text}")
            del event["user"]
            return dict(event, subtype="bot_message", bot_id=bot_id, username="otherbot")

        await fake.push(fake.callback(from_bot("C42", "ignored here")))
        await fake.push(fake.callback(from_bot("C77", "answered here")))
        await fake.push(fake.callback(from_bot("C77", "my own", bot_id=BOT_ID)))
        await fake.wait_sent("C77", 1)
        await fake.wait_for(lambda: len(fake.acked) == 3)
        assert replies(fake, "C77") == ["echo: answered here"]
        assert replies(fake, "C42") == []
        history = await bot.api_host.history("slack", "group:C42", 10)
        assert [(h.sender_id, h.text) for h in history] == [("B999", "ignored here")]
        fate = await bot.fates.of(history[0].id)
        assert fate is not None and (fate.fate, fate.detail) == ("ignored", "bot_sender")


async def test_an_audio_clip_is_transcribed(fake: FakeSlack, tmp_path: Path) -> None:
    """An audio file shared in a message (a clip, `audio/*`) is fetched with the bot token
    from Slack's file host, as images are, and transcribed by voice.stt."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    clip = await asyncio.to_thread(tone, 2.0, "ogg")
    async with AudioApi(transcripts=["deploy at noon"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(SlackDriver(fake), tmp_path, voice={"stt": stt}):
            fake.user("U15", "Ida")
            file = fake.add_file(clip, "audio/ogg")
            await fake.push(fake.callback(fake.message_event("D15", "U15", "", files=[file])))
            [reply] = await fake.wait_sent("D15", 1)
    assert read_mrkdwn(reply.text)[0] == "echo: deploy at noon"
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_is_uploaded_as_an_audio_file(fake: FakeSlack, tmp_path: Path) -> None:
    """`/tts on`: after the reply's text, its voice is uploaded (files_upload_v2: the upload
    URL, the bytes, completeUploadExternal) into the same chat; the file decodes as audio."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(SlackDriver(fake), tmp_path, **config):
            fake.user("U16", "Jo")
            await fake.push(fake.callback(fake.message_event("D16", "U16", "say it")))
            text, voice = await fake.wait_sent("D16", 2)
    assert read_mrkdwn(text.text)[0] == "echo: say it" and not text.files
    [data] = voice.files
    fmt, seconds = probe(data)
    assert "ogg" in fmt and seconds > 0.5
