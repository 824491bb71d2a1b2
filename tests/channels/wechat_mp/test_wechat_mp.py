"""The WeChat Official Account channel beyond the contract: the signed callback in plain and
safe mode and its refusals, the five-second passive reply and what goes through the
customer-service API instead, WeChat's redelivery of a MsgId answered once, an account
without customer-service messages, 45009, settings and `chatfn check`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

pytest.importorskip("cryptography")

from chatfn.channels.wechat_mp import check  # noqa: E402
from chatfn.channels.wechat_mp.settings import WechatMpSettings  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from tests.channels.contract import ESSAY, _echo, contract_registry  # noqa: E402
from tests.channels.held_model import HeldModel  # noqa: E402
from tests.channels.wechat_mp.wechat_mp_driver import WechatMpDriver  # noqa: E402
from tests.channels.wechat_mp.wechat_mp_fake import FakeWechatMp  # noqa: E402
from tests.kit import until  # noqa: E402


@asynccontextmanager
async def running(
    fake: FakeWechatMp,
    tmp_path: Path,
    gate: asyncio.Event | None = None,
    bot_config: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[WechatMpDriver]:
    driver = WechatMpDriver(fake, **settings)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'mp.db'}"},
            "plugins": {"paths": []},
            "channels": {"wechat_mp": driver.channel_settings()},
            **(bot_config or {}),
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        config,
        registry=contract_registry(),
        model=HeldModel(_echo, gate or asyncio.Event()),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, config.channels.wechat_mp)  # type: ignore[attr-defined]
        await bot.start()
        yield driver
    finally:
        await driver.detach()
        await bot.aclose()


def said(fake: FakeWechatMp, user: str) -> list[tuple[str, str]]:
    return [(p.via, p.content) for p in fake.sent.get(user, []) if p.msgtype == "text"]


Make = Callable[..., Any]


@pytest.mark.parametrize("safe", [True, False])
async def test_the_url_check_and_a_message_answered_in_the_passive_reply(
    tmp_path: Path, safe: bool
) -> None:
    import aiohttp

    async with FakeWechatMp(safe=safe) as fake, running(fake, tmp_path):
        query, _ = fake.sealed("")
        check = {k: query[k] for k in ("signature", "timestamp", "nonce")}
        async with aiohttp.ClientSession() as s:
            async with s.get(fake.callback_url, params={**check, "echostr": "e123"}) as r:
                assert (r.status, await r.text()) == (200, "e123")
            async with s.get(
                fake.callback_url, params={**check, "signature": "0" * 40, "echostr": "e"}
            ) as r:
                assert r.status == 401
        status, _ = await fake.deliver("u1", fake.message_xml("u1", fake.next_id(), "hi"))
        assert status == 200
        assert said(fake, "u1") == [("passive", "echo: hi")]  # read and checked by the fake
        assert not [r for r in fake.refusals if r[0].endswith("custom/send")]


async def test_safe_mode_refuses_forged_plain_and_foreign_callbacks(tmp_path: Path) -> None:
    async with FakeWechatMp() as fake, running(fake, tmp_path):
        plain = fake.message_xml("u2", fake.next_id(), "hi")
        for forge in ("signature", "msg_signature"):
            query, body = fake.sealed(plain, forge=forge)
            assert (await fake.post(query, body))[0] == 401, forge
        query, _ = fake.sealed(plain)
        plain_query = {k: query[k] for k in ("signature", "timestamp", "nonce")}
        assert (await fake.post(plain_query, plain))[0] == 401  # plain although safe mode
        assert fake.crypt is not None
        fake.crypt.receive_id = "wx_another_account"
        query, body = fake.sealed(plain)
        fake.crypt.receive_id = fake.app_id
        assert (await fake.post(query, body))[0] == 401
        assert (await fake.post(query, "<xml><Encrypt>"))[0] in (400, 401)
        assert fake.sent == {}


async def test_plain_mode_refuses_an_encrypted_callback(tmp_path: Path) -> None:
    async with FakeWechatMp(safe=False) as fake, running(fake, tmp_path):
        query, _ = fake.sealed("")
        body = "<xml><ToUserName>gh</ToUserName><Encrypt><![CDATA[abcd]]></Encrypt></xml>"
        assert (await fake.post({**query, "encrypt_type": "aes"}, body))[0] == 400


async def test_a_late_answer_goes_through_the_customer_service_api(tmp_path: Path) -> None:
    gate = asyncio.Event()
    async with FakeWechatMp() as fake, running(fake, tmp_path, gate, reply_wait=0.3):
        status, text = await fake.deliver("u3", fake.message_xml("u3", fake.next_id(), "hold"))
        assert (status, text) == (200, "success")  # in time, with nothing to show
        gate.set()
        await fake.wait_sent("u3", 1)
        assert said(fake, "u3") == [("custom", "echo: hold")]
        assert fake.tries == [200]  # answered: WeChat does not send it again


async def test_a_long_answer_is_the_passive_reply_then_customer_service_messages(
    tmp_path: Path,
) -> None:
    async with FakeWechatMp() as fake, running(fake, tmp_path):
        await fake.deliver("u4", fake.message_xml("u4", fake.next_id(), "/essay"))
        await until(lambda: any("The end." in c for _, c in said(fake, "u4")), 10)
        got = said(fake, "u4")
        assert got[0][0] == "passive" and {v for v, _ in got[1:]} == {"custom"}
        assert all(len(c.encode()) <= 2048 for _, c in got)
        assert " ".join(c for _, c in got).split()[:3] == ESSAY.split()[:3]


async def test_redelivery_waits_for_the_same_answer_without_customer_service(
    tmp_path: Path,
) -> None:
    """An unverified account: the answer must be a passive reply. The first try is held past
    WeChat's wait, so WeChat's next try (the same MsgId) gets the answer once it is ready."""
    gate = asyncio.Event()
    async with FakeWechatMp() as fake:
        fake.customer_service = False
        fake.answer_within = 1.5  # WeChat's 5 s, shortened (the channel holds a try 1.8 s)
        async with running(fake, tmp_path, gate, reply_wait=0.3, customer_service=False):
            msg_id = fake.next_id()
            status, _ = await fake.deliver("u5", fake.message_xml("u5", msg_id, "hold on"))
            assert status == 0  # no answer within WeChat's wait: it sends the message again
            gate.set()  # the answer comes while WeChat's second try waits
            await fake.wait_sent("u5", 1)
            await until(lambda: fake.tries[-1] == 200, 5)
            assert said(fake, "u5") == [("passive", "echo: hold on")]
            assert len(fake.tries) <= 3
            assert not [r for r in fake.refusals if r[1] == 48001]


async def test_without_customer_service_what_does_not_fit_is_dropped(tmp_path: Path) -> None:
    async with FakeWechatMp() as fake:
        fake.customer_service = False
        async with running(fake, tmp_path, customer_service=False):
            await fake.deliver("u6", fake.message_xml("u6", fake.next_id(), "/essay"))
            await fake.deliver("u6", fake.message_xml("u6", fake.next_id(), "after"))
            await fake.wait_sent("u6", 2)
            got = said(fake, "u6")
            assert [v for v, _ in got] == ["passive", "passive"]
            assert got[1] == ("passive", "echo: after")
            assert not [r for r in fake.refusals if r[0].endswith("custom/send")]


async def test_45009_is_waited_out(tmp_path: Path) -> None:
    gate = asyncio.Event()
    async with FakeWechatMp() as fake, running(fake, tmp_path, gate, reply_wait=0.3):
        fake.rate_limited["u7"] = 1.0
        await fake.deliver("u7", fake.message_xml("u7", fake.next_id(), "hold"))
        gate.set()
        await fake.wait_sent("u7", 1, timeout=10)
        assert ("/cgi-bin/message/custom/send", 45009) in fake.refusals
        assert said(fake, "u7") == [("custom", "echo: hold")]


async def test_an_image_in_is_downloaded_through_the_api(tmp_path: Path) -> None:
    from tests.channels.contract import PNG

    async with FakeWechatMp() as fake, running(fake, tmp_path):
        media = fake.add_media(PNG)
        await fake.deliver("u8", fake.message_xml("u8", fake.next_id(), media_id=media))
        [reply] = await fake.wait_sent("u8", 1)
        assert reply.via == "passive" and "[image" in reply.content  # the model saw it


@pytest.mark.parametrize("recognition", ["明天几点开会", ""])
async def test_a_voice_message_is_heard(tmp_path: Path, recognition: str) -> None:
    """WeChat's own speech recognition (`Recognition`) is the message's text, no STT call;
    without it, the voice file (media/get; Speex here) is transcribed by voice.stt."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 1.5, "speex")
    async with FakeWechatMp() as fake, AudioApi(transcripts=["帮我查一下天气"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, bot_config={"voice": {"stt": stt}}):
            media = fake.add_media(voice)
            await fake.deliver("u9", fake.voice_xml("u9", fake.next_id(), media, recognition))
            [reply] = await fake.wait_sent("u9", 1)
    assert (recognition or "帮我查一下天气") in reply.content
    if recognition:
        assert api.transcriptions == []
    else:
        [req] = api.transcriptions
        assert 1.3 < req.seconds < 1.7


def test_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="encoding_aes_key"):
        WechatMpSettings(encoding_aes_key="x")  # type: ignore[arg-type]
    assert "channels.wechat_mp.app_id" in (WechatMpSettings().problem() or "")
    assert WechatMpSettings().api_base == "https://api.weixin.qq.com"
    with pytest.raises(ValueError, match="reply_wait"):
        WechatMpSettings(reply_wait=6)


async def test_check_offline_and_online() -> None:
    async with FakeWechatMp(safe=False) as fake:
        settings = WechatMpSettings.model_validate(WechatMpDriver(fake).channel_settings())
        ok, warn, online = await check(settings, True)
        assert ok.status == "ok" and warn.status == "warn" and "encoding_aes_key" in warn.detail
        assert online.status == "ok"
        refused = settings.model_copy(update={"app_secret": SecretStr("wrong")})
        *_, bad = await check(refused, True)
        assert bad.status == "fail" and "channels.wechat_mp.app_id / app_secret" in bad.detail
        assert [p.status for p in await check(WechatMpSettings(), True)] == ["fail"]


@pytest.mark.parametrize("customer_service", [True, False])
async def test_a_spoken_reply_goes_as_a_voice_message(
    tmp_path: Path, customer_service: bool
) -> None:
    """`/tts on` (issue 43, voice out): the text in the passive reply, then its voice as a
    customer-service `voice` message: media/upload type=voice of MP3 (the fake decodes it with
    ffmpeg and refuses what is not AMR or MP3, over 2 MB or over 60 s) and its media_id. An
    account without the customer-service API gets the text alone."""
    from loguru import logger

    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    async with FakeWechatMp() as fake, AudioApi() as api:
        fake.customer_service = customer_service
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(fake, tmp_path, bot_config=config, customer_service=customer_service):
            await fake.deliver("u10", fake.message_xml("u10", fake.next_id(), "read this aloud"))
            await fake.wait_sent("u10", 2 if customer_service else 1, 30)
            if not customer_service:
                await until(lambda: any("spoken reply" in w for w in warnings), 10)
    logger.remove(sink)
    assert said(fake, "u10")[0][0] == "passive"
    assert said(fake, "u10")[0][1].endswith("read this aloud")
    voices = [p for p in fake.sent.get("u10", []) if p.msgtype == "voice"]
    assert fake.refusals == []
    if not customer_service:  # one line says why there is no voice
        assert voices == [] and fake.voices == {} and len(api.speeches) == 1
        [why] = [w for w in warnings if "spoken reply" in w]
        assert "customer_service: false" in why
        return
    [voice] = voices
    assert voice.via == "custom" and voice.voice is not None
    fmt, seconds = probe(voice.voice)
    assert fmt == "mp3" and seconds > 0.5
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
