"""The WeCom channel (app mode) beyond the contract: the callback's URL check and its
refusals, WeCom's redelivery answered once, the access_token renewed on 42001, the fake
refusing an over-long text, settings and `chatfn check`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

pytest.importorskip("cryptography")

from chatfn.channels.wecom import SPEC, check  # noqa: E402
from chatfn.channels.wecom.settings import WecomSettings  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel  # noqa: E402
from tests.channels.contract import _echo, contract_registry  # noqa: E402
from tests.channels.wecom.wecom_driver import WecomDriver  # noqa: E402
from tests.channels.wecom.wecom_fake import FakeWecom  # noqa: E402
from tests.kit import until  # noqa: E402


@pytest.fixture
async def fake() -> AsyncIterator[FakeWecom]:
    async with FakeWecom() as server:
        yield server


@pytest.fixture
async def running(fake: FakeWecom, tmp_path: Path) -> AsyncIterator[tuple[WecomDriver, Bot]]:
    async with _running(fake, tmp_path) as both:
        yield both


@contextlib.asynccontextmanager
async def _running(
    fake: FakeWecom, tmp_path: Path, more: dict[str, Any] | None = None
) -> AsyncIterator[tuple[WecomDriver, Bot]]:
    driver = WecomDriver(fake)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'wecom.db'}"},
            "plugins": {"paths": []},
            "channels": {"wecom": driver.channel_settings()},
            **(more or {}),
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.wecom)
        await bot.start()
        yield driver, bot
    finally:
        await driver.detach()
        await bot.aclose()


def texts(fake: FakeWecom, user: str) -> list[str]:
    return [p.content for p in fake.sent.get(user, []) if p.msgtype == "text"]


async def test_the_url_check_is_answered_and_a_forged_one_refused(
    running: tuple[WecomDriver, Bot],
) -> None:
    fake = running[0].fake
    assert await fake.verify_url("1616140317555161061") == (200, "1616140317555161061")
    status, _ = await fake.verify_url("1616140317555161061", forge=True)
    assert status == 401


async def test_forged_broken_and_foreign_callbacks_are_refused(
    running: tuple[WecomDriver, Bot],
) -> None:
    fake = running[0].fake
    plain = fake.message_xml("u1", fake.next_id(), "hi")
    query, body = fake.sealed(plain, forge=True)
    assert (await fake.post(query, body))[0] == 401
    query, _ = fake.sealed(plain)
    assert (await fake.post(query, "not xml"))[0] == 400
    doctype = '<!DOCTYPE x [<!ENTITY a "b">]><xml><Encrypt>&a;</Encrypt></xml>'
    assert (await fake.post(query, doctype))[0] == 400
    # Encrypted for another corp id: signed correctly, refused inside.
    fake.crypt.receive_id = "ww_another_corp"
    query, body = fake.sealed(plain)
    fake.crypt.receive_id = fake.corp_id
    assert (await fake.post(query, body))[0] == 401
    assert fake.sent == {}


async def test_a_redelivered_message_is_answered_once(running: tuple[WecomDriver, Bot]) -> None:
    fake = running[0].fake
    msg_id = fake.next_id()
    plain = fake.message_xml("u2", msg_id, "once please")
    query, body = fake.sealed(plain)
    assert (await fake.post(query, body))[0] == 200
    for _ in range(2):  # WeCom's retries of the same MsgId (new nonce and signature each)
        query, body = fake.sealed(plain)
        assert (await fake.post(query, body))[0] == 200
    await fake.wait_sent("u2", 1)
    await fake.deliver(fake.message_xml("u2", fake.next_id(), "next"))
    await fake.wait_sent("u2", 2)
    assert texts(fake, "u2") == ["echo: once please", "echo: next"]


async def test_an_expired_token_is_fetched_again(running: tuple[WecomDriver, Bot]) -> None:
    driver, _ = running
    fake = driver.fake
    await fake.deliver(fake.message_xml("u3", fake.next_id(), "first"))
    await fake.wait_sent("u3", 1)
    # The driver's 0.1 s keepalive would race the send for the revoked token: once one more
    # check has passed, the channel's next one is an hour away and the send meets it first.
    driver.channel.keepalive = 3600.0
    checks = fake.agent_checks
    await until(lambda: fake.agent_checks > checks, message="no keepalive check")
    fetched = fake.token_fetches
    fake.revoke_tokens()  # 40014 for the token the channel holds
    await fake.deliver(fake.message_xml("u3", fake.next_id(), "second"))
    await fake.wait_sent("u3", 2)
    assert fake.token_fetches == fetched + 1
    assert ("/cgi-bin/message/send", 40014) in fake.refusals
    assert texts(fake, "u3") == ["echo: first", "echo: second"]


async def test_long_cjk_replies_stay_within_2048_bytes(
    running: tuple[WecomDriver, Bot],
) -> None:
    fake = running[0].fake
    said = "长" * 1500  # 4500 bytes of UTF-8: the echo must go out in three parts or more
    await fake.deliver(fake.message_xml("u4", fake.next_id(), f"/echo {said}"))
    sent = await fake.wait_sent("u4", 3)
    assert all(len(p.content.encode()) <= 2048 for p in sent)
    assert "".join(p.content for p in sent).replace("\n", "") == said
    assert not [r for r in fake.refusals if r[1] == 45002]


async def test_the_fake_refuses_what_wecom_refuses(fake: FakeWecom) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        async with s.get(
            f"{fake.base}/cgi-bin/gettoken", params={"corpid": fake.corp_id, "corpsecret": "x"}
        ) as r:
            assert (await r.json())["errcode"] == 40001
        async with s.get(
            f"{fake.base}/cgi-bin/gettoken",
            params={"corpid": fake.corp_id, "corpsecret": fake.secret},
        ) as r:
            token = (await r.json())["access_token"]
        url = f"{fake.base}/cgi-bin/message/send?access_token={token}"
        base: dict[str, Any] = {"touser": "u", "msgtype": "text", "agentid": fake.agent_id}
        async with s.post(url, json={**base, "text": {"content": "é" * 1025}}) as r:
            assert (await r.json())["errcode"] == 45002  # 2050 bytes
        async with s.post(url, json={**base, "text": {"content": ""}}) as r:
            assert (await r.json())["errcode"] == 44004
        async with s.post(url, data=b"{not json") as r:
            assert (await r.json())["errcode"] == 47001
        async with s.post(url, json={**base, "agentid": 1, "text": {"content": "x"}}) as r:
            assert (await r.json())["errcode"] == 40056
        async with s.post(f"{url}x", json={**base, "text": {"content": "x"}}) as r:
            assert (await r.json())["errcode"] == 40014


def test_settings_name_the_key_and_the_mode() -> None:
    with pytest.raises(ValueError, match="encoding_aes_key"):
        WecomSettings(encoding_aes_key="too-short")  # type: ignore[arg-type]
    assert "channels.wecom.corp_id" in (WecomSettings().problem() or "")
    robot = WecomSettings(mode="aibot", token="t")  # type: ignore[arg-type]
    assert robot.problem() is not None and "encoding_aes_key" in robot.problem()  # type: ignore[operator]
    assert "corp_id" not in (robot.problem() or "")
    assert WecomSettings().api_base == "https://qyapi.weixin.qq.com"
    with pytest.raises(ValueError, match="api_base"):
        WecomSettings(api_base="ftp://x")


async def test_check_offline_and_online(fake: FakeWecom) -> None:
    settings = WecomSettings.model_validate(WecomDriver(fake).channel_settings())
    [offline] = await check(settings, False)
    assert offline.status == "ok" and "/wecom/callback" in offline.detail
    _, online = await check(settings, True)
    assert online.status == "ok" and "chatfn test app" in online.detail
    refused = settings.model_copy(update={"secret": SecretStr("wrong")})
    _, bad = await check(refused, True)
    assert bad.status == "fail" and "channels.wecom.corp_id / secret / agent_id" in bad.detail
    missing = await check(WecomSettings(), True)
    assert [p.status for p in missing] == ["fail"]
    assert SPEC.capabilities is not None and SPEC.capabilities.confirm_stored


async def test_a_group_chat_of_the_app_is_written_through_appchat(
    running: tuple[WecomDriver, Bot],
) -> None:
    from chatfn.common.messages import DeliveryRefused, OutgoingMessage

    driver, _ = running
    fake = driver.fake
    out = OutgoingMessage("wecom", "group:wrkSFfCgAAtMQKg4xqDatM5C9IDHFpTw", "**hello** all")
    await driver.channel.send(out)
    [posted] = await fake.wait_sent("wrkSFfCgAAtMQKg4xqDatM5C9IDHFpTw", 1)
    assert posted.body == {
        "chatid": "wrkSFfCgAAtMQKg4xqDatM5C9IDHFpTw",
        "msgtype": "text",
        "text": {"content": "hello all"},
    }
    with pytest.raises(DeliveryRefused, match="not a WeCom chat id"):
        await driver.channel.send(OutgoingMessage("wecom", "channel:x y", "no"))


async def test_a_voice_message_is_transcribed(tmp_path: Path) -> None:
    """A member's voice message (MsgType voice, its file by media/get) goes to voice.stt and
    its transcript is answered. WeCom sends AMR; Debian's ffmpeg can decode AMR but has no
    encoder to make one, so the file here is OGG/Opus: the channel sends on what it gets."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeWecom() as fake, AudioApi(transcripts=["明天请假"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with _running(fake, tmp_path, more={"voice": {"stt": stt}}):
            media = fake.add_media(voice)
            await fake.deliver(fake.voice_xml("zhangsan", fake.next_id(), media))
            await fake.wait_sent("zhangsan", 1)
    assert texts(fake, "zhangsan") == ["echo: 明天请假"]
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_as_a_voice_message(tmp_path: Path) -> None:
    """`/tts on` (issue 43, voice out): the reply's text, then its voice as WeCom takes it:
    media/upload type=voice of AMR (the fake decodes it with ffmpeg and refuses anything
    else, over 2 MB or over 60 s) and a message/send `voice` with that media_id."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeWecom() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        more = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with _running(fake, tmp_path, more=more):
            await fake.deliver(fake.message_xml("lisi", fake.next_id(), "read this aloud"))
            text, voice = await fake.wait_sent("lisi", 2, 30)
    assert text.msgtype == "text" and text.content.endswith("read this aloud")
    assert voice.msgtype == "voice" and voice.body["agentid"] == fake.agent_id
    assert voice.voice is not None and voice.voice.startswith(b"#!AMR\n")
    fmt, seconds = probe(voice.voice)
    assert fmt == "amr" and seconds > 0.5
    assert fake.refusals == []
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
