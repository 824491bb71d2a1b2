"""The DingTalk channel's own cases (the shared contract runs in test_contract_dingtalk.py):
the callback's signature, the Stream protocol's acks (once stored), pings and disconnects,
redelivery by msgId, the session webhook and the robot send APIs, the token's refresh, what
the local DingTalk refuses, the settings, the Markdown and the probe. Everything through the
real dingtalk-stream SDK against tests/channels/dingtalk/dingtalk_fake.py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

pytest.importorskip("dingtalk_stream")

from pydantic import ValidationError  # noqa: E402

from chatfn.channels.dingtalk import SPEC, check  # noqa: E402
from chatfn.channels.dingtalk.parse import parse_chat_id, read_message  # noqa: E402
from chatfn.channels.dingtalk.render import to_dingtalk_markdown  # noqa: E402
from chatfn.channels.dingtalk.settings import DingTalkSettings  # noqa: E402
from chatfn.channels.dingtalk.webhook import Refused, check_request, signature  # noqa: E402
from chatfn.common.messages import OutgoingMessage  # noqa: E402
from tests.channels.dingtalk.dingtalk_driver import DingTalkDriver, running  # noqa: E402
from tests.channels.dingtalk.dingtalk_fake import FakeDingTalk, read_markdown  # noqa: E402
from tests.channels.held_model import HeldModel  # noqa: E402
from tests.kit import free_port, until  # noqa: E402


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    async with FakeDingTalk() as server:
        yield server


def texts(fake: FakeDingTalk, target: str) -> list[str]:
    return [read_markdown(p.text, p.at)[0] for p in fake.sent_to(target) if p.image is None]


# -- offline -----------------------------------------------------------------------------------
def test_chat_ids_round_trip_and_bad_ones_are_named() -> None:
    group = parse_chat_id("group:cidAsXSBLnA==")
    assert (group.target, group.is_group, group.key) == (
        "cidAsXSBLnA==",
        True,
        "group:cidAsXSBLnA==",
    )
    user = parse_chat_id("private:manager4220")
    assert (user.target, user.is_group) == ("manager4220", False)
    for bad in ("group:notacid", "private:a:b", "room:cid1", "private:", "group:cid x"):
        with pytest.raises(ValueError, match="DingTalk chat id"):
            parse_chat_id(bad)


def test_the_documented_message_is_read() -> None:
    """The robot message of DingTalk's Stream protocol page (developerpedia
    docs/learn/stream/protocol.md, "回调推送一：机器人消息"), its ids kept as published."""
    data = {
        "conversationId": "cidAsXSBLnA==",
        "atUsers": [{"dingtalkId": "$:LWCP_v1:$4TgHFUDZ8Qi8qr3"}],
        "chatbotCorpId": "ding9fcd16741",
        "chatbotUserId": "$:LWCP_v1:$x3vTgHFUDZ8Qi8qr3",
        "msgId": "msgLICYeHgY4JtMQw==",
        "senderNick": "用户",
        "isAdmin": True,
        "senderStaffId": "16650698",
        "sessionWebhookExpiredTime": 1690367502152,
        "createAt": 1690362101894,
        "senderCorpId": "ding9d16741",
        "conversationType": "2",
        "senderId": "$:LWCP_v1:$jqTgIfhRX9Q==",
        "conversationTitle": "测试群",
        "isInAtList": True,
        "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=76da36b48f59e8",
        "text": {"content": " 测试数据"},
        "robotCode": "dingr3xc0b",
        "msgtype": "text",
    }
    read = read_message(data)
    assert read.chat is not None and read.chat.key == "group:cidAsXSBLnA=="
    assert (read.sender, read.sender_name, read.text) == ("16650698", "用户", "测试数据")
    assert read.mentioned and read.is_admin and read.message_id == "msgLICYeHgY4JtMQw=="
    assert read.webhook_expires == 1690367502152
    by_id = dict(data, atUsers=[{"dingtalkId": data["chatbotUserId"]}])
    del by_id["isInAtList"]
    assert read_message(by_id).mentioned  # atUsers naming the robot, without isInAtList
    assert not read_message(dict(by_id, atUsers=[{"dingtalkId": "$:other"}])).mentioned
    picture = dict(data, msgtype="picture", content={"downloadCode": "dc1"}, conversationType="1")
    read = read_message(picture)
    assert read.chat is not None and read.chat.key == "private:16650698"
    assert read.download_codes == ["dc1"] and read.text == ""


def test_the_callback_signature_is_dingtalks() -> None:
    """sign = base64(HmacSHA256(secret, timestamp + "\\n" + secret)), written out here as
    DingTalk's page writes it, apart from the channel's code."""
    secret, stamp = "this is secret", "1577262236757"
    mac = hmac.new(secret.encode(), f"{stamp}\n{secret}".encode(), hashlib.sha256).digest()
    assert signature(stamp, secret) == base64.b64encode(mac).decode()
    body = json.dumps({"msgtype": "text"}).encode()
    now = 1577262236757 + 1000
    headers = {"timestamp": stamp, "sign": signature(stamp, secret)}
    assert check_request(body, headers, secret, now_ms=now) == {"msgtype": "text"}
    refusals = [
        ({"timestamp": stamp, "sign": signature(stamp, "other")}, body, now, 401),
        ({"timestamp": stamp}, body, now, 401),
        (headers, body, now + 3600 * 1000 + 1, 401),  # more than an hour off
        (headers, b"[1]", now, 400),
    ]
    for bad_headers, bad_body, at, status in refusals:
        with pytest.raises(Refused) as refused:
            check_request(bad_body, bad_headers, secret, now_ms=at)
        assert refused.value.status == status


def test_settings_name_the_key_and_where_oapi_goes() -> None:
    default = DingTalkSettings(client_id="dingk", client_secret="s")
    assert (default.api_base, default.oapi_base) == (
        "https://api.dingtalk.com",
        "https://oapi.dingtalk.com",
    )
    assert default.robot == "dingk" and default.mode == "stream"
    local = DingTalkSettings(client_id="k", client_secret="s", api_base="http://127.0.0.1:9/")
    assert local.api_base == local.oapi_base == "http://127.0.0.1:9"
    for bad in ("http://api.dingtalk.com", "https://api.dingtalk.com/v1.0", "ftp://x"):
        with pytest.raises(ValidationError, match="api_base"):
            DingTalkSettings(client_id="k", client_secret="s", api_base=bad)
    with pytest.raises(ValidationError, match="mode"):
        DingTalkSettings(client_id="k", client_secret="s", mode="polling")
    assert "channels.dingtalk.client_id" in (DingTalkSettings().problem() or "")
    assert DingTalkSettings(client_id="k", client_secret="").problem() is not None


def test_markdown_is_dingtalks() -> None:
    md = to_dingtalk_markdown("# Title\n\nSome **bold**, _it_, `x` and [l](https://e.com/a_(b)).")
    assert md == "# Title\n\nSome **bold**, *it*, `x` and [l](https://e.com/a_(b))."
    assert to_dingtalk_markdown("~~gone~~ - a\n- b") == "gone - a\n\n- b"
    assert to_dingtalk_markdown("```py\nx = 1\n```") == "```py\nx = 1\n```"


async def test_probe_offline_and_online(fake: FakeDingTalk) -> None:
    settings = DingTalkSettings(client_id=fake.app_key, client_secret="s3cret", api_base=fake.base)
    [offline] = await check(settings, False)
    assert offline.status == "ok" and "Stream connection" in offline.detail
    [_, online] = await check(settings, True)
    assert online.status == "ok", online
    wrong = DingTalkSettings(client_id=fake.app_key, client_secret="old", api_base=fake.base)
    [_, refused] = await check(wrong, True)
    assert refused.status == "fail" and "client_secret" in refused.detail
    [unset] = await check(DingTalkSettings(), True)
    assert unset.status == "fail" and "client_id" in unset.detail
    away = DingTalkSettings(
        client_id="k", client_secret="s", api_base=f"http://127.0.0.1:{free_port()}"
    )
    [_, down] = await check(away, True)
    assert down.status == "fail" and "not reachable" in down.detail


# -- the Stream connection ---------------------------------------------------------------------
async def test_a_message_is_acked_only_once_stored_and_once_by_msgid(
    fake: FakeDingTalk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message waiting behind its chat's running turn gets no ack while it waits, then 200;
    past ACK_WAIT a 500; the same msgId pushed again (a new frame) is acked 200, handled once."""
    from chatfn.channels.dingtalk import channel as dingtalk_channel
    from tests.channels.contract import _echo

    monkeypatch.setattr(dingtalk_channel, "ACK_WAIT", 30.0)
    gate = asyncio.Event()
    async with running(DingTalkDriver(fake), tmp_path, model=HeldModel(_echo, gate)):
        first = await fake.push(fake.robot_message(group=None, sender="u9", text="hold on"))
        assert (await fake.wait_ack(first)).code == 200  # stored; its turn is running
        queued = await fake.push(fake.robot_message(group=None, sender="u9", text="queued"))
        await asyncio.sleep(0.15)
        assert queued not in fake.acks  # taken, not stored: no ack yet
        gate.set()
        assert (await fake.wait_ack(queued)).code == 200

        gate.clear()
        monkeypatch.setattr(dingtalk_channel, "ACK_WAIT", 0.2)
        await fake.push(fake.robot_message(group=None, sender="u9", text="hold again"))
        late = fake.robot_message(group=None, sender="u9", text="late")
        frame = await fake.push(late)
        assert (await fake.wait_ack(frame)).code == 500
        gate.set()
        await fake.wait_sent("u9", 4)
        again = await fake.push(late)  # pushed again: a new frame, the same msgId
        assert (await fake.wait_ack(again)).code == 200
        assert json.loads(fake.acks[again].data) == {"response": "OK"}
    assert texts(fake, "u9") == ["echo: hold on", "echo: queued", "echo: hold again", "echo: late"]


async def test_a_message_pushed_again_after_a_restart_is_handled_once(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    driver = DingTalkDriver(fake)
    message = fake.robot_message(group=None, sender="u10", text="only once")
    async with running(driver, tmp_path):
        await fake.push(message)
        await fake.wait_sent("u10", 1)
    async with running(driver, tmp_path):  # the same database, a new process
        again = await fake.push(message)
        assert (await fake.wait_ack(again)).code == 200
        await fake.push(fake.robot_message(group=None, sender="u10", text="next"))
        await fake.wait_sent("u10", 2)
    assert texts(fake, "u10") == ["echo: only once", "echo: next"]


async def test_ping_is_answered_and_disconnect_reconnects(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    async with running(DingTalkDriver(fake), tmp_path):
        ping = await fake.ping()
        ack = await fake.wait_ack(ping)
        assert ack.code == 200 and "opaque" in json.loads(ack.data)
        assert fake.subscriptions == [{"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}]
        await fake.frame("SYSTEM", "disconnect", {"reason": "connection is expired"})
        await fake.wait_connected(count=2)  # the client closed and opened a new one
        await fake.push(fake.robot_message(group=None, sender="u11", text="still here"))
        await fake.wait_sent("u11", 1)
    assert texts(fake, "u11") == ["echo: still here"]
    assert not fake.bad_frames and len(fake.unanswerable) <= 1  # the SDK answers a disconnect


# -- the way out -------------------------------------------------------------------------------
async def test_without_a_valid_session_webhook_the_robot_apis_send(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    """An expired session webhook, one on another host, and a message the bot starts (no
    session at all) go through groupMessages/send / oToMessages/batchSend; a group reply
    through the session webhook carries the mention, through the API none."""
    driver = DingTalkDriver(fake)
    async with running(driver, tmp_path, bot={"reply_with_mention": True}):
        expired = fake.robot_message(group="cidgexp==", sender="u1", text="late", mention=True)
        expired["sessionWebhookExpiredTime"] = int((time.time() - 10) * 1000)
        await fake.push(expired)
        elsewhere = fake.robot_message(group=None, sender="u2", text="where")
        elsewhere["sessionWebhook"] = "https://evil.example/robot/sendBySession?session=x"
        await fake.push(elsewhere)
        fresh = fake.robot_message(group="cidgok==", sender="u3", text="hi", mention=True)
        await fake.push(fresh)
        await fake.wait_sent("cidgexp==", 1)
        await fake.wait_sent("u2", 1)
        await fake.wait_sent("cidgok==", 1)
        assert driver.channel is not None
        await driver.channel.send(
            OutgoingMessage(platform="dingtalk", chat_id="private:u4", text="a **reminder**")
        )
    [group_api] = fake.sent_to("cidgexp==")
    assert (group_api.way, group_api.msgtype, group_api.text) == (
        "api",
        "sampleMarkdown",
        "echo: late",
    )
    [private_api] = fake.sent_to("u2")
    assert private_api.way == "api" and private_api.text == "echo: where"
    [session] = fake.sent_to("cidgok==")
    assert session.way == "session" and session.at == ["u3"] and session.text == "@u3 echo: hi"
    [reminder] = fake.sent_to("u4")
    assert reminder.way == "api" and reminder.text == "a **reminder**"
    assert reminder.title == "a reminder"


async def test_a_refused_token_is_fetched_again_and_long_cjk_and_emoji_fit(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    driver = DingTalkDriver(fake)
    async with running(driver, tmp_path):
        assert driver.channel is not None
        fake.revoke_tokens()  # the token the channel holds is refused from now on
        long_cjk = "\n\n".join("钉" * 900 for _ in range(6))  # 5,400 characters, 16 KB
        await driver.channel.send(
            OutgoingMessage(platform="dingtalk", chat_id="private:u5", text=long_cjk)
        )
        emoji = " ".join("😀" * 9 for _ in range(400))  # 4,000 characters, 14.8 KB
        await driver.channel.send(
            OutgoingMessage(platform="dingtalk", chat_id="private:u5e", text=emoji)
        )
    parts = fake.sent_to("u5")
    assert len(parts) >= 2 and "".join(p.text for p in parts).replace("\n", "") == "钉" * 5400
    emoji_parts = fake.sent_to("u5e")
    assert len(emoji_parts) == 2 and " ".join(p.text for p in emoji_parts) == emoji
    assert ("/v1.0/robot/oToMessages/batchSend", 401, "InvalidAuthentication") in fake.refused


async def test_the_fake_refuses_what_dingtalk_refuses(fake: FakeDingTalk) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{fake.base}/v1.0/oauth2/accessToken",
            json={"appKey": fake.app_key, "appSecret": fake.app_secret},
        ) as r:
            token = (await r.json())["accessToken"]
        send = f"{fake.base}/v1.0/robot/oToMessages/batchSend"
        body = {"robotCode": fake.app_key, "userIds": ["u1"], "msgKey": "sampleMarkdown"}
        too_long = json.dumps({"title": "t", "text": "x" * 15001})
        cases = [
            ({"x-acs-dingtalk-access-token": "bad"}, dict(body, msgParam="{}"), 401),
            ({"x-acs-dingtalk-access-token": token}, dict(body, msgParam=too_long), 400),
            ({"x-acs-dingtalk-access-token": token}, dict(body, msgParam="not json"), 400),
            (
                {"x-acs-dingtalk-access-token": token},
                dict(body, robotCode="other", msgParam="{}"),
                400,
            ),
        ]
        for headers, payload, status in cases:
            async with http.post(send, json=payload, headers=headers) as r:
                assert r.status == status, payload
        async with http.post(
            f"{fake.base}/v1.0/gateway/connections/open",
            json={"clientId": fake.app_key, "clientSecret": "guess", "subscriptions": []},
        ) as r:
            assert r.status == 401
        async with http.get(f"{fake.base}/connect?ticket=made-up") as r:
            assert r.status == 401


async def test_throttling_waits_and_keeps_order(fake: FakeDingTalk, tmp_path: Path) -> None:
    """A throttled API send (HTTP 429, QpsLimitForApi): waited out, the next part after it."""
    driver = DingTalkDriver(fake)
    async with running(driver, tmp_path):
        assert driver.channel is not None
        fake.rate_limit("u6", 0.5)
        began = time.monotonic()
        await driver.channel.send(
            OutgoingMessage(platform="dingtalk", chat_id="private:u6", text="one")
        )
        await driver.channel.send(
            OutgoingMessage(platform="dingtalk", chat_id="private:u6", text="two")
        )
        assert time.monotonic() - began >= 0.5
    assert texts(fake, "u6") == ["one", "two"]
    assert any(code == "Forbidden.AccessDenied.QpsLimitForApi" for _, _, code in fake.refused)


# -- webhook mode ------------------------------------------------------------------------------
async def test_webhook_mode_on_the_http_channels_port(fake: FakeDingTalk, tmp_path: Path) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.channel_registry import find_channels
    from chatfn.runtime.settings import parse_settings
    from chatfn.testing import ScriptedModel
    from tests.channels.contract import _echo, contract_registry

    driver = DingTalkDriver(fake, mode="webhook")
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'hook.db'}"},
            "plugins": {"paths": []},
            "channels": {"dingtalk": driver.channel_settings(), "http": {"port": 0}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    try:
        driver.channel = SPEC.build(bot.channel_host, settings.channels.dingtalk)
        await http.start()  # on port 0: the URL is known once it listens
        url = f"http://127.0.0.1:{http.bound_port}/dingtalk/callback"
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        message = fake.robot_message(group=None, sender="u7", text="over the hook")
        assert (await fake.callback(url, message, secret="guess")).status == 401
        stale = int((time.time() - 7200) * 1000)
        assert (await fake.callback(url, message, timestamp=stale)).status == 401
        assert (await fake.callback(url, message)).status == 200
        assert (await fake.callback(url, message)).status == 200  # sent again: handled once
        await fake.callback(url, fake.robot_message(group=None, sender="u7", text="again"))
        await fake.wait_sent("u7", 2)
        await until(lambda: len(fake.sent_to("u7")) >= 2, 5)
        assert texts(fake, "u7") == ["echo: over the hook", "echo: again"]
        assert fake.connections == 0  # no Stream connection in webhook mode
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()


@pytest.mark.parametrize("recognition", ["下午三点开会", ""])
async def test_a_voice_message_is_heard(
    fake: FakeDingTalk, tmp_path: Path, recognition: str
) -> None:
    """An audio message: DingTalk's own `recognition` is the text (no STT call); without it,
    the file (messageFiles/download) goes to voice.stt and its transcript is answered."""
    from tests.channels.conftest import LOCAL_MEDIA
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 2.0, "ogg")
    async with AudioApi(transcripts=["帮我订会议室"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        config = {"voice": {"stt": stt}, "bot": LOCAL_MEDIA}
        async with running(DingTalkDriver(fake), tmp_path, **config):
            message = fake.robot_message(
                group=None, sender="u7", voice=voice, recognition=recognition
            )
            await fake.push(message)
            await fake.wait_sent("u7", 1)
    assert texts(fake, "u7") == [f"echo: {recognition or '帮我订会议室'}"]
    if recognition:
        assert api.transcriptions == []
    else:
        [req] = api.transcriptions
        assert 1.9 < req.seconds < 2.1


@pytest.mark.parametrize("seconds", [None, 70.0])
async def test_a_spoken_reply_goes_as_sample_audio(
    fake: FakeDingTalk, tmp_path: Path, seconds: float | None
) -> None:
    """`/tts on` in a DingTalk chat (issue 43, voice out): the reply's Markdown through the
    session webhook, then its voice through the robot API as `sampleAudio`: AMR uploaded to
    media/upload type=voice (the fake decodes it with ffmpeg and refuses anything else, over
    2 MB or over 60 s) and its mediaId with the length in ms as a string. A reply spoken for
    70 s goes as two clips, each within the 60 s the upload takes."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with AudioApi() as api:
        if seconds is not None:
            api.speech_seconds = seconds
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        voice = {"tts": tts}
        async with running(
            DingTalkDriver(fake), tmp_path, voice=voice, chats=[{"voice": {"tts": "on"}}]
        ):
            await fake.push(fake.robot_message(group=None, sender="u8", text="read this aloud"))
            clips = 1 if seconds is None else 2
            posted = await fake.wait_sent("u8", 1 + clips, 30)
    text, *voices = posted
    assert text.way == "session" and read_markdown(text.text, text.at)[0].endswith(
        "read this aloud"
    )
    assert [v.msgtype for v in voices] == ["sampleAudio"] * clips and fake.refused == []
    lengths = []
    for v in voices:
        assert v.voice is not None and v.voice.startswith(b"#!AMR\n") and v.way == "api"
        fmt, length = probe(v.voice)
        assert fmt == "amr" and 0.5 < length <= 60
        assert abs(v.duration - length * 1000) < 100  # the length it was given, in ms
        lengths.append(length)
    if seconds is not None:
        assert abs(sum(lengths) - seconds) < 0.5
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
