"""The LINE channel beyond the contract: the signed webhook and its refusals (a bad or missing
X-Line-Signature, a body that is not LINE's, the console's empty Verify), reply tokens (used
once, refused when too old: the push API instead), the push API's retry key (never twice),
mentions in groups and rooms, 401 / 429 / the monthly limit, pictures without `public_url`,
a redelivered event taken once, settings and `chatfn check`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

pytest.importorskip("linebot.v3")

from chatfn.channels import kit  # noqa: E402
from chatfn.channels.line import check  # noqa: E402
from chatfn.channels.line.api import LineApi  # noqa: E402
from chatfn.channels.line.channel import cut_mentions  # noqa: E402
from chatfn.channels.line.send import LineSender, Replies, parse_chat_id  # noqa: E402
from chatfn.channels.line.settings import DEFAULT_DATA_BASE, LineSettings  # noqa: E402
from chatfn.common.messages import OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from tests.channels.contract import PNG_URI, Chat, _echo, contract_registry  # noqa: E402
from tests.channels.held_model import HeldModel  # noqa: E402
from tests.channels.line.line_driver import LineDriver, chat_native, user_id  # noqa: E402
from tests.channels.line.line_fake import FakeLine, sign  # noqa: E402
from tests.kit import until  # noqa: E402

ALICE = Chat("private", "1001")


@asynccontextmanager
async def running(
    fake: FakeLine,
    tmp_path: Path,
    bot: dict[str, Any] | None = None,
    more: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[LineDriver]:
    driver = LineDriver(fake, **settings)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'line.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False, **(bot or {})},
            "channels": {"line": driver.channel_settings()},
            **(more or {}),
        },
        base_dir=tmp_path,
    )
    the_bot = Bot(
        config,
        registry=contract_registry(),
        model=HeldModel(_echo, asyncio.Event()),
        load_plugins=False,
    )
    try:
        await driver.attach(the_bot.channel_host, config.channels.line)  # type: ignore[attr-defined]
        await the_bot.start()
        driver.bot = the_bot  # type: ignore[attr-defined]
        yield driver
    finally:
        await driver.detach()
        await the_bot.aclose()


def texts(fake: FakeLine, to: str) -> list[tuple[str, str]]:
    return [(p.via, p.text) for p in fake.sent.get(to, []) if p.image is None]


# -- the webhook ---------------------------------------------------------------------------------
def test_the_signature_is_the_sdks_and_the_documented_hmac() -> None:
    """X-Line-Signature is base64(HMAC-SHA256(channel secret, body)) (the reference's
    "Verify the signature"; LINE publishes no example vector, so the fake's own computation
    stands for it): the SDK's validator takes it and refuses one changed byte."""
    from linebot.v3.webhook import SignatureValidator

    body = '{"destination":"Uxxx","events":[]}'
    validator = SignatureValidator("channel-secret")
    good = sign("channel-secret", body.encode())
    assert validator.validate(body, good)
    assert not validator.validate(body.replace("[]", "[ ]"), good)
    assert not validator.validate(body, sign("other-secret", body.encode()))


async def test_bad_missing_and_malformed_webhooks_are_refused(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        fake.redeliveries = 0
        event = fake.message_event(driver.source(ALICE, "1001"), fake.text_message("hi"))
        assert await fake.deliver(event, signature=sign("wrong", b"x")) == 400
        body = b'{"destination": "U", "events": ['
        assert await fake.post_raw(body, {"X-Line-Signature": sign(fake.secret, body)}) == 400
        assert await fake.post_raw(b"{}", {}) == 400  # no signature at all
        assert await fake.deliver() == 200  # the console's Verify: no events
        await asyncio.sleep(0.1)
        assert fake.sent == {}  # nothing refused reached the bot
        assert await fake.deliver(event) == 200
        await fake.wait_sent(chat_native(ALICE), 1)


async def test_a_webhook_body_in_two_tcp_segments_is_read_whole(tmp_path: Path) -> None:
    """A body larger than one segment arrives in pieces on a real network: the channel reads
    it to its end (kit.webhook_body), so its signature holds and the event is answered
    (`request.content.read(n)` returned the first piece only, and LINE's event was refused)."""
    from urllib.parse import urlsplit

    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        fake.redeliveries = 0
        event = fake.message_event(driver.source(ALICE, "1001"), fake.text_message("x" * 3000))
        body = json.dumps({"destination": fake.bot_id, "events": [event]}).encode()
        url = urlsplit(fake.callback_url)
        head = (
            f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            "Content-Type: application/json\r\n"
            f"X-Line-Signature: {sign(fake.secret, body)}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(head + body[:1000])
        await writer.drain()
        await asyncio.sleep(0.1)  # the handler is running with the first piece only
        writer.write(body[1000:])
        await writer.drain()
        status = (await reader.readline()).decode()
        writer.close()
        assert " 200 " in status, status
        await fake.wait_sent(chat_native(ALICE), 1)
        sent = "".join(t for _, t in texts(fake, chat_native(ALICE)))
        assert sent.startswith("echo:") and sent.count("x") == 3000


async def test_a_redelivered_event_is_answered_once(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        to = chat_native(ALICE)
        event = fake.message_event(driver.source(ALICE, "1001"), fake.text_message("once"))
        assert await fake.deliver(event) == 200
        await fake.wait_sent(to, 1)
        again = {**event, "deliveryContext": {"isRedelivery": True}}
        assert await fake.deliver(again) == 200
        await driver.say(ALICE, "next")
        await fake.wait_sent(to, 2)
        assert [t for _, t in texts(fake, to)] == ["echo: once", "echo: next"]


# -- reply tokens and push -----------------------------------------------------------------------
async def test_an_answer_goes_by_reply_token_once_then_by_push(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        to = chat_native(ALICE)
        await driver.say(ALICE, "hello")
        await fake.wait_sent(to, 1)
        assert texts(fake, to) == [("reply", "echo: hello")]
        # A reminder-like send to the chat: no reply token, so push.
        channel = driver.channel
        await channel.send(OutgoingMessage("line", f"private:{to}", "later", event_id=1))
        assert texts(fake, to)[-1] == ("push", "later")


async def test_a_reply_token_refused_by_line_falls_back_to_push(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        fake.reply_ttl = 0.0  # LINE: the token is too old by the time the answer comes
        to = chat_native(ALICE)
        await driver.say(ALICE, "slow")
        await fake.wait_sent(to, 1)
        assert texts(fake, to) == [("push", "echo: slow")]
        assert ("POST", "/v2/bot/message/reply") in fake.recorded  # tried, refused 400


async def test_a_reply_token_older_than_reply_token_ttl_is_not_tried(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path, reply_token_ttl=0.001) as driver:
        to = chat_native(ALICE)
        await asyncio.sleep(0.01)
        await driver.say(ALICE, "late")
        await fake.wait_sent(to, 1)
        assert texts(fake, to) == [("push", "echo: late")]
        assert ("POST", "/v2/bot/message/reply") not in fake.recorded


async def test_a_crash_between_a_push_and_its_mark_does_not_show_it_twice(
    tmp_path: Path,
) -> None:
    """The bot pushed an answer and died before marking its outbox row: the next start sends
    the row again with the same X-Line-Retry-Key, LINE answers 409 (accepted before) and the
    user sees it once."""
    from tests.channels.contract import _unmark_last

    async with FakeLine() as fake:
        to = chat_native(ALICE)
        async with running(fake, tmp_path, reply_token_ttl=0.001) as driver:
            await asyncio.sleep(0.01)
            await driver.say(ALICE, "hello")
            await fake.wait_sent(to, 1)
            await _unmark_last(driver.bot, "line", f"private:{to}")
        async with running(fake, tmp_path, reply_token_ttl=0.001) as driver:
            await until(lambda: fake.recorded.count(("POST", "/v2/bot/message/push")) >= 2)
            await asyncio.sleep(0.01)
            await driver.say(ALICE, "later")
            await fake.wait_sent(to, 2)
        assert texts(fake, to) == [("push", "echo: hello"), ("push", "echo: later")]
        assert fake.recorded.count(("POST", "/v2/bot/message/push")) == 3


def test_a_reply_token_is_used_once_and_not_when_old() -> None:
    replies = Replies(ttl=50.0)
    replies.add("m1", "tok", "q1")
    assert replies.take("m1") == "tok"
    assert replies.take("m1") is None  # single use
    assert replies.quote("m1") == "q1"
    old = Replies(ttl=0.0)
    old.add("m2", "tok2", None)
    assert old.take("m2") is None


async def test_a_push_sent_again_with_its_retry_key_is_delivered_once() -> None:
    """The outbox sends a row again after a crash: the same X-Line-Retry-Key, answered 409
    by LINE (accepted before), counts as sent and nothing is shown twice."""
    async with FakeLine() as fake:
        settings = LineSettings(
            channel_secret=SecretStr(fake.secret),
            channel_access_token=SecretStr(fake.token),
            api_base=fake.base,
            send_rate=0,
        )
        api = LineApi(settings)
        sender = LineSender(api, settings, None, Replies(50.0), None)
        to = user_id("1001")
        out = OutgoingMessage("line", f"private:{to}", "only once", event_id=42)
        try:
            await sender.deliver(out)
            await sender.deliver(out)
            await sender.deliver(OutgoingMessage("line", f"private:{to}", "other", event_id=43))
        finally:
            await api.aclose()
        assert texts(fake, to) == [("push", "only once"), ("push", "other")]
        assert fake.recorded.count(("POST", "/v2/bot/message/push")) == 3


async def test_the_fake_refuses_what_line_refuses() -> None:
    """Over-long text, six messages, an http image, a retry key that is no UUID, no token."""
    import aiohttp

    async with FakeLine() as fake, aiohttp.ClientSession() as s:
        url, auth = f"{fake.base}/v2/bot/message/push", {"Authorization": f"Bearer {fake.token}"}
        to = user_id("1001")

        async def push(messages: Any, headers: dict[str, str] | None = None) -> int:
            body = {"to": to, "messages": messages}
            async with s.post(url, json=body, headers={**auth, **(headers or {})}) as r:
                return r.status

        assert await push([{"type": "text", "text": "x" * 5001}]) == 400
        assert await push([{"type": "text", "text": "😀" * 2501}]) == 400  # UTF-16 units
        assert await push([{"type": "text", "text": "x"}] * 6) == 400
        image = {"type": "image", "originalContentUrl": "http://a/b.png", "previewImageUrl": "x"}
        assert await push([image]) == 400
        assert await push([{"type": "text", "text": "x"}], {"X-Line-Retry-Key": "nope"}) == 400
        async with s.post(url, data=b"{", headers=auth) as r:
            assert r.status == 400
        async with s.post(url, json={"to": to, "messages": []}) as r:
            assert r.status == 401
        assert await push([{"type": "text", "text": "x" * 5000}]) == 200
        assert fake.sent[to][0].text == "x" * 5000


async def test_a_long_answer_is_split_at_5000_and_more_than_5_parts_go_in_several_requests(
    tmp_path: Path,
) -> None:
    async with FakeLine() as fake:
        settings = LineSettings(
            channel_secret=SecretStr(fake.secret),
            channel_access_token=SecretStr(fake.token),
            api_base=fake.base,
            send_rate=0,
        )
        api = LineApi(settings)
        sender = LineSender(api, settings, None, Replies(50.0), None)
        to = user_id("1001")
        text = "\n\n".join(f"paragraph {n} " + "word " * 900 for n in range(8))  # ~36000
        try:
            await sender.deliver(OutgoingMessage("line", f"private:{to}", text, event_id=5))
        finally:
            await api.aclose()
        parts = [p.text for p in fake.sent[to]]
        assert len(parts) >= 8 and all(len(p) <= 5000 for p in parts)
        assert " ".join(parts).split() == text.split()
        assert fake.recorded.count(("POST", "/v2/bot/message/push")) == -(-len(parts) // 5)


# -- groups, rooms, mentions ---------------------------------------------------------------------
async def test_rooms_are_groups_and_the_bots_mention_is_cut(tmp_path: Path) -> None:
    async with FakeLine() as fake, running(fake, tmp_path):
        room = "R" + "7" * 32
        source = {"type": "room", "roomId": room, "userId": user_id("1002")}
        said = fake.text_message("what now", mention_self=True)
        assert await fake.deliver(fake.message_event(source, said)) == 200
        [answer] = await fake.wait_sent(room, 1)
        assert answer.text == "echo: what now"
        other = fake.text_message("not for the bot")
        assert await fake.deliver(fake.message_event(source, other)) == 200
        said = fake.text_message("again", mention_self=True)
        assert await fake.deliver(fake.message_event(source, said)) == 200
        await fake.wait_sent(room, 2)
        assert [p.text for p in fake.sent[room]] == ["echo: what now", "echo: again"]


async def test_a_group_answer_mentions_its_user(tmp_path: Path) -> None:
    group = Chat("group", "5001")
    async with FakeLine() as fake, running(fake, tmp_path, bot={"reply_with_mention": True}) as d:
        await d.say(group, "hi", sender="1002", mention=True)
        [answer] = await fake.wait_sent(chat_native(group), 1)
        assert answer.mentions == [user_id("1002")] and answer.text == "echo: hi"
        await d.say(group, "{braces}", sender="1002", mention=True)  # v2 would read {..}
        answers = await fake.wait_sent(chat_native(group), 2)
        assert answers[1].mentions == [] and answers[1].text == "echo: {braces}"


def test_cut_mentions_counts_utf16_units() -> None:
    class M:
        def __init__(self, index: int, length: int, is_self: bool) -> None:
            self.index, self.length, self.is_self = index, length, is_self

    text = "😀 @Bot hello @Ann"  # the emoji is two UTF-16 units
    cut, mine = cut_mentions(text, [M(3, 4, True), M(14, 4, False)])
    assert (cut, mine) == ("😀  hello @Ann", True)
    assert cut_mentions("plain", []) == ("plain", False)


# -- pictures ------------------------------------------------------------------------------------
async def test_without_public_url_a_made_picture_is_not_sent_but_the_text_is(
    tmp_path: Path,
) -> None:
    async with FakeLine() as fake, running(fake, tmp_path, public_url=None) as driver:
        to = chat_native(ALICE)
        await driver.channel.send(
            OutgoingMessage("line", f"private:{to}", "a picture", images=[PNG_URI], event_id=3)
        )
        assert [(p.text, p.image) for p in fake.sent[to]] == [("a picture", None)]
        https = "https://example.com/cat.png"
        await driver.channel.send(
            OutgoingMessage("line", f"private:{to}", "", images=[https], event_id=4)
        )
        assert fake.sent[to][-1].image == https  # an https URL goes as it is


# -- failures ------------------------------------------------------------------------------------
async def test_429_waits_and_the_monthly_limit_is_a_refusal() -> None:
    async with FakeLine() as fake:
        settings = LineSettings(
            channel_secret=SecretStr(fake.secret),
            channel_access_token=SecretStr(fake.token),
            api_base=fake.base,
            send_rate=0,
        )
        api = LineApi(settings)
        sender = LineSender(api, settings, None, Replies(50.0), None)
        to = user_id("1001")
        chat = f"private:{to}"
        try:
            # LINE names no wait in its 429; one that is named (a proxy) is honoured.
            fake.refuse_next("/push", 429, body={"message": "Too Many Requests"}, retry_after=0.3)
            began = asyncio.get_running_loop().time()
            await sender.deliver(OutgoingMessage("line", chat, "after the wait", event_id=8))
            assert asyncio.get_running_loop().time() - began >= 0.3
            fake.refuse_next("/push", 429, body={"message": "You have reached your monthly limit."})
            with pytest.raises(kit.DeliveryRefused, match="monthly"):
                await sender.deliver(OutgoingMessage("line", chat, "quota", event_id=9))
            fake.token = "revoked"
            with pytest.raises(kit.CredentialsRefused, match="channel_access_token"):
                await sender.deliver(OutgoingMessage("line", chat, "refused", event_id=10))
            with pytest.raises(kit.DeliveryRefused, match="not a LINE chat id"):
                await sender.deliver(OutgoingMessage("line", "private:1001", "x"))
        finally:
            await api.aclose()
        assert [p.text for p in fake.sent[to]] == ["after the wait"]


async def test_a_dropped_push_is_sent_again_once(tmp_path: Path) -> None:
    async with FakeLine() as fake:
        settings = LineSettings(
            channel_secret=SecretStr(fake.secret),
            channel_access_token=SecretStr(fake.token),
            api_base=fake.base,
            send_rate=0,
        )
        api = LineApi(settings)
        sender = LineSender(api, settings, None, Replies(50.0), None)
        to = user_id("1001")
        fake.drop_next("/push")
        out = OutgoingMessage("line", f"private:{to}", "through", event_id=11)
        try:
            with pytest.raises(kit.Unreachable):
                await sender.deliver(out)
            await sender.deliver(out)  # what the outbox does next
        finally:
            await api.aclose()
        assert [p.text for p in fake.sent[to]] == ["through"]


# -- settings and check --------------------------------------------------------------------------
def test_settings_name_their_keys_and_the_content_host() -> None:
    assert LineSettings().problem() == (
        "channels.line.channel_secret, channels.line.channel_access_token must be set "
        "(LINE Developers console -> your Messaging API channel)"
    )
    assert LineSettings().data_base == DEFAULT_DATA_BASE
    assert LineSettings(api_base="http://127.0.0.1:9/").data_base == "http://127.0.0.1:9"
    with pytest.raises(ValueError, match="api_base"):
        LineSettings(api_base="ftp://x")
    with pytest.raises(ValueError, match="webhook_path"):
        LineSettings(webhook_path="line")
    assert parse_chat_id("group:R" + "a" * 32).group
    with pytest.raises(ValueError, match="private:U<32 hex>"):
        parse_chat_id("group:U" + "a" * 32)


async def test_check_online_names_the_bot_or_the_refused_token() -> None:
    async with FakeLine() as fake:
        settings = LineSettings(
            channel_secret=SecretStr(fake.secret),
            channel_access_token=SecretStr(fake.token),
            api_base=fake.base,
        )
        probes = await check(settings, online=True)
        assert [p.status for p in probes] == ["ok", "warn", "ok"]
        assert "Fake Bot" in probes[-1].detail
        fake.token = "revoked"
        probes = await check(settings, online=True)
        assert probes[-1].status == "fail"
        assert "channels.line.channel_access_token" in probes[-1].detail
    assert [p.status for p in await check(LineSettings(), online=True)] == ["fail"]


async def test_a_revoked_token_at_connect_is_refused_credentials_naming_the_key(
    tmp_path: Path,
) -> None:
    from chatfn.channels.line import SPEC

    async with FakeLine() as fake:
        driver = LineDriver(fake, channel_access_token="revoked")
        config = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'line.db'}"},
                "plugins": {"paths": []},
                "channels": {"line": driver.channel_settings()},
            },
            base_dir=tmp_path,
        )
        bot = Bot(config, registry=contract_registry(), model=HeldModel(_echo, asyncio.Event()))
        channel = SPEC.build(bot.channel_host, config.channels.line)  # type: ignore[attr-defined]
        try:
            with pytest.raises(kit.CredentialsRefused, match="channel_access_token"):
                await channel.connect()
            fake.token = "revoked"
            assert "Fake Bot" in await channel.connect()
        finally:
            await channel.close()
            await bot.aclose()


async def test_an_event_whose_handling_failed_before_the_store_is_answered_500_and_redelivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host.handle` raising before the message is stored: the webhook answers 500, LINE's
    redelivery (the same webhookEventId, isRedelivery) is taken, answered 200, and answered
    once."""
    from chatfn.channels import intake
    from tests.channels.held_model import broker_away

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.0)
    async with FakeLine() as fake, running(fake, tmp_path) as driver:
        tries = broker_away(driver.bot, monkeypatch, {"once": 1})
        to = chat_native(ALICE)
        event = fake.message_event(driver.source(ALICE, "1001"), fake.text_message("once"))
        assert await fake.deliver(event) == 200
        assert fake.webhook_answers == [500, 200]
        await fake.wait_sent(to, 1)
        assert tries == ["once", "once"] and [t for _, t in texts(fake, to)] == ["echo: once"]


async def test_a_voice_message_is_transcribed(tmp_path: Path) -> None:
    """A LINE audio message (M4A at the content endpoint) is fetched and transcribed by
    voice.stt; the transcript is answered."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 2.0, "m4a")
    async with FakeLine() as fake, AudioApi(transcripts=["what time is it"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, more={"voice": {"stt": stt}}):
            source = {"type": "user", "userId": "U" + "4" * 32}
            assert await fake.deliver(fake.message_event(source, fake.audio_message(voice))) == 200
            await fake.wait_sent("U" + "4" * 32, 1)
    assert texts(fake, "U" + "4" * 32)[0][1] == "echo: what time is it"
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_as_an_audio_message(tmp_path: Path) -> None:
    """`/tts on`: after the text, an audio message whose MP3 the bot serves on its own URL
    (`public_url`), with its length; the fake fetches it as LINE would and it decodes."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeLine() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        more = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(fake, tmp_path, more=more):
            user = "U" + "5" * 32
            source = {"type": "user", "userId": user}
            said = fake.text_message("say it")
            assert await fake.deliver(fake.message_event(source, said)) == 200
            text, voice = await fake.wait_sent(user, 2)
    assert text.text == "echo: say it"
    assert isinstance(voice.image, bytes) and voice.audio_ms is not None
    fmt, seconds = probe(voice.image)
    assert "mp3" in fmt and abs(seconds * 1000 - voice.audio_ms) < 300
