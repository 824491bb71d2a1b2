"""The WhatsApp channel beyond the contract: Meta's webhook check (hub.challenge) and the
signed events (X-Hub-Signature-256) with their refusals, statuses and other numbers ignored,
a wamid redelivered answered once, images by media id through chatfn.common.fetch with the
token, the 24-hour window (the template, or a logged refusal; WhatsApp's 131047), rate-limit
codes, 4096 characters, settings and `chatfn check`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from chatfn.channels import kit
from chatfn.channels.whatsapp import check
from chatfn.channels.whatsapp.api import GraphApi, GraphError
from chatfn.channels.whatsapp.channel import signature_of
from chatfn.channels.whatsapp.send import WhatsAppSender, Windows, parse_chat_id
from chatfn.channels.whatsapp.settings import WhatsAppSettings
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from tests.channels.contract import PNG, _echo, contract_registry
from tests.channels.held_model import HeldModel
from tests.channels.whatsapp.whatsapp_driver import WhatsAppDriver
from tests.channels.whatsapp.whatsapp_fake import FakeWhatsApp, sign


@asynccontextmanager
async def running(
    fake: FakeWhatsApp, tmp_path: Path, more: dict[str, Any] | None = None, **settings: Any
) -> AsyncIterator[Any]:
    driver = WhatsAppDriver(fake, **settings)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'wa.db'}"},
            "plugins": {"paths": []},
            "channels": {"whatsapp": driver.channel_settings()},
            **(more or {}),
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        config,
        registry=contract_registry(),
        model=HeldModel(_echo, asyncio.Event()),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, config.channels.whatsapp)  # type: ignore[attr-defined]
        await bot.start()
        driver.bot = bot
        yield driver
    finally:
        await driver.detach()
        await bot.aclose()


def settings_for(fake: FakeWhatsApp, **more: Any) -> WhatsAppSettings:
    return WhatsAppSettings(
        phone_number_id=fake.phone_number_id,
        access_token=SecretStr(fake.token),
        app_secret=SecretStr(fake.app_secret),
        verify_token=SecretStr(fake.verify_token),
        api_base=fake.base,
        send_rate=0,
        **more,
    )


@asynccontextmanager
async def sender_for(fake: FakeWhatsApp, **more: Any) -> AsyncIterator[WhatsAppSender]:
    settings = settings_for(fake, **more)
    api = GraphApi(settings)
    try:
        yield WhatsAppSender(api, settings, None, Windows())
    finally:
        await api.aclose()


def texts(fake: FakeWhatsApp, to: str) -> list[str]:
    return [p.text or f"template:{p.template}" for p in fake.sent.get(to, [])]


# -- the webhook ---------------------------------------------------------------------------------
def test_the_signature_is_hmac_sha256_of_the_body_as_published() -> None:
    """X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256 of the raw body with the app
    secret. Meta publishes no example; RFC 4231's test case 2 is HMAC-SHA256's own."""
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert signature_of("Jefe", b"what do ya want for nothing?") == "sha256=" + expected
    assert sign("Jefe", b"what do ya want for nothing?") == "sha256=" + expected


async def test_the_webhook_check_answers_the_challenge_only_to_its_token(tmp_path: Path) -> None:
    async with FakeWhatsApp() as fake, running(fake, tmp_path):
        assert await fake.verify(fake.verify_token, "1158201444") == (200, "1158201444")
        status, _ = await fake.verify("not-the-token")
        assert status == 403


async def test_bad_signatures_and_bodies_are_refused_and_statuses_ignored(tmp_path: Path) -> None:
    async with FakeWhatsApp() as fake, running(fake, tmp_path):
        user = "15550001111"
        message = fake.text(user, "hello")
        fake.last_inbound[user] = 1e12  # in the window
        body = json.dumps(fake.envelope([message])).encode()
        assert await fake.post(body, signature=sign("wrong-secret", body)) == 401
        assert await fake.post(body, signature="") == 401
        assert await fake.post(body[:-3]) == 400  # signed, but not JSON
        assert await fake.post(json.dumps({"object": "page", "entry": []}).encode()) == 400
        statuses = fake.envelope(
            [],
            statuses=[{"id": "wamid.X", "status": "read", "timestamp": "1", "recipient_id": user}],
        )
        assert await fake.post(json.dumps(statuses).encode()) == 200
        other = fake.envelope([fake.text(user, "to another number")])
        other["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "999"
        assert await fake.post(json.dumps(other).encode()) == 200
        await asyncio.sleep(0.1)
        assert fake.sent == {}  # nothing refused or ignored reached the bot
        assert await fake.post(body) == 200
        await fake.wait_sent(user, 1)
        assert texts(fake, user) == ["echo: hello"]


async def test_a_wamid_delivered_again_is_answered_once(tmp_path: Path) -> None:
    async with FakeWhatsApp() as fake, running(fake, tmp_path):
        user = "15550002222"
        message = fake.text(user, "once")
        assert await fake.deliver(message) == 200
        await fake.wait_sent(user, 1)
        assert await fake.deliver(message) == 200  # Meta's retry of the same event
        assert await fake.deliver(fake.text(user, "next")) == 200
        await fake.wait_sent(user, 2)
        assert texts(fake, user) == ["echo: once", "echo: next"]


async def test_an_image_comes_by_media_id_with_the_token(tmp_path: Path) -> None:
    """GET /{media-id} names the URL; the download needs the token too (the fake refuses it
    without): the bot fetched it through chatfn.common.fetch with its Authorization."""
    async with FakeWhatsApp() as fake, running(fake, tmp_path):
        user = "15550003333"
        assert await fake.deliver(fake.image(user, PNG, caption="what is it")) == 200
        await fake.wait_sent(user, 1)
        assert texts(fake, user)[0].startswith("echo: what is it")
        download = [p for m, p in fake.recorded if p.startswith("/download/")]
        assert len(download) == 1


async def test_a_voice_note_is_transcribed(tmp_path: Path) -> None:
    """An audio message (a voice note, OGG/Opus, by media id) is downloaded the way images are
    (the API's URL, then the file with the token) and transcribed by voice.stt."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeWhatsApp() as fake, AudioApi(transcripts=["where are you"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, more={"voice": {"stt": stt}}):
            user = "15550004444"
            assert await fake.deliver(fake.audio(user, voice)) == 200
            await fake.wait_sent(user, 1)
    assert texts(fake, user)[0].startswith("echo: where are you")
    [req] = api.transcriptions
    assert req.format == "wav" and 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_as_an_audio_message(tmp_path: Path) -> None:
    """`/tts on`: after the text, the voice is uploaded (POST /media) and sent as an `audio`
    message (the fake refuses an id that is not an uploaded audio type); it decodes."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeWhatsApp() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        more = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(fake, tmp_path, more=more):
            user = "15550005555"
            assert await fake.deliver(fake.text(user, "say it")) == 200
            text, voice = await fake.wait_sent(user, 2)
    assert (text.kind, voice.kind) == ("text", "audio") and text.text == "echo: say it"
    assert voice.audio is not None
    fmt, seconds = probe(voice.audio)
    assert "ogg" in fmt and seconds > 0.5


# -- the 24-hour window --------------------------------------------------------------------------
async def test_outside_the_window_the_template_goes_instead(tmp_path: Path) -> None:
    async with FakeWhatsApp() as fake, running(fake, tmp_path, template="answer_waiting") as d:
        user = "15550004444"
        fake.age(user, 30)
        # The bot saw the user write 30 hours ago: the window is known to be closed.
        d.channel.windows.saw(f"private:{user}", fake.last_inbound[user])
        await d.channel.send(OutgoingMessage("whatsapp", f"private:{user}", "a reminder"))
        assert texts(fake, user) == ["template:answer_waiting"]
        # Not known (the bot started since): WhatsApp's 131047, then the template.
        other = "15550005555"
        fake.age(other, 25)
        await d.channel.send(OutgoingMessage("whatsapp", f"private:{other}", "hello again"))
        assert texts(fake, other) == ["template:answer_waiting"]


async def test_outside_the_window_without_a_template_is_a_logged_refusal() -> None:
    from loguru import logger

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="ERROR")
    try:
        async with FakeWhatsApp() as fake, sender_for(fake) as sender:
            user = "15550006666"
            fake.age(user, 48)
            with pytest.raises(kit.DeliveryRefused, match="24 hours"):
                await sender.deliver(OutgoingMessage("whatsapp", f"private:{user}", "late"))
            assert fake.sent == {}
    finally:
        logger.remove(sink)
    assert any("channels.whatsapp.template is not set" in line for line in lines), lines


def test_the_window_is_known_from_what_the_chat_last_wrote() -> None:
    now = [1_000_000.0]
    windows = Windows(clock=lambda: now[0])
    assert not windows.closed("private:1")  # never seen: WhatsApp will say
    windows.saw("private:1")
    now[0] += 23.9 * 3600
    assert not windows.closed("private:1")
    now[0] += 0.2 * 3600
    assert windows.closed("private:1")


# -- sending -------------------------------------------------------------------------------------
async def test_long_texts_are_split_within_4096_and_the_fake_refuses_4097() -> None:
    async with FakeWhatsApp() as fake, sender_for(fake) as sender:
        user = "15550007777"
        fake.age(user, 1)
        text = "\n\n".join(f"paragraph {n} " + "word " * 500 for n in range(6))  # ~15000
        await sender.deliver(OutgoingMessage("whatsapp", f"private:{user}", text))
        parts = texts(fake, user)
        assert len(parts) >= 4 and all(len(p) <= 4096 for p in parts)
        assert " ".join(parts).split() == text.split()
        with pytest.raises(GraphError) as refused:
            await sender.client.send({"to": user, "type": "text", "text": {"body": "x" * 4097}})
        assert refused.value.code == 100


@pytest.mark.parametrize("code", [130429, 131056, 80007])
def test_rate_limit_codes_are_rate_limited(code: int) -> None:
    settings = WhatsAppSettings(phone_number_id="1", api_base="http://127.0.0.1:9")
    sender = WhatsAppSender(GraphApi(settings), settings, None, Windows())
    mapped = sender.classify(GraphError(400, code, "slow down"), "private:1")
    assert isinstance(mapped, kit.RateLimited)
    assert isinstance(sender.classify(GraphError(401, 190, "expired"), "k"), kit.CredentialsRefused)
    assert isinstance(sender.classify(GraphError(503, 1, "down"), "k"), kit.Unreachable)
    assert isinstance(sender.classify(GraphError(400, 100, "bad"), "k"), kit.DeliveryRefused)


async def test_a_pair_rate_limit_waits_and_then_sends() -> None:
    async with FakeWhatsApp() as fake, sender_for(fake) as sender:
        user = "15550008888"
        fake.age(user, 1)
        fake.rate_limited[user] = 0.5
        began = asyncio.get_running_loop().time()
        await sender.deliver(OutgoingMessage("whatsapp", f"private:{user}", "after"))
        assert asyncio.get_running_loop().time() - began >= 0.5
        assert texts(fake, user) == ["after"]


async def test_a_group_answer_goes_to_the_group() -> None:
    async with FakeWhatsApp() as fake, sender_for(fake) as sender:
        group = "Y2FwaV9ncm91cDox"
        fake.age(group, 1)
        await sender.deliver(OutgoingMessage("whatsapp", f"group:{group}", "to all", is_group=True))
        assert texts(fake, group) == ["to all"]
    with pytest.raises(ValueError, match="not a WhatsApp chat id"):
        parse_chat_id("private:+1555")


# -- settings and check --------------------------------------------------------------------------
def test_settings_name_their_keys() -> None:
    assert WhatsAppSettings().problem() == (
        "channels.whatsapp.phone_number_id, channels.whatsapp.access_token, "
        "channels.whatsapp.app_secret, channels.whatsapp.verify_token must be set "
        "(Meta App Dashboard -> WhatsApp -> API Setup, and App settings -> Basic)"
    )
    with pytest.raises(ValueError, match="phone_number_id"):
        WhatsAppSettings(phone_number_id="+1 555 0100")
    with pytest.raises(ValueError, match="api_version"):
        WhatsAppSettings(api_version="23")
    assert WhatsAppSettings(api_base="https://graph.facebook.com/").graph == (
        "https://graph.facebook.com/v23.0"
    )


async def test_check_online_names_the_number_or_the_refused_token() -> None:
    async with FakeWhatsApp() as fake:
        settings = settings_for(fake)
        probes = await check(settings, online=True)
        assert [p.status for p in probes] == ["ok", "warn", "ok"]
        assert "Fake Business" in probes[-1].detail
        fake.token = "revoked"
        probes = await check(settings, online=True)
        assert probes[-1].status == "fail"
        assert "channels.whatsapp.access_token" in probes[-1].detail
    assert [p.status for p in await check(WhatsAppSettings(), online=False)] == ["fail"]


async def test_fetch_sends_the_token_to_the_named_origin_only() -> None:
    """chatfn.common.fetch's `headers` (the WhatsApp media download's Authorization) go to
    the URL's origin; a redirect to another origin does not carry them."""
    import ipaddress

    from aiohttp import web

    from chatfn.common.fetch import fetch
    from tests.kit import bound_port

    seen: dict[str, str | None] = {}

    async def other(request: web.Request) -> web.Response:
        seen["other"] = request.headers.get("Authorization")
        return web.Response(body=PNG, content_type="image/png")

    async def first(request: web.Request) -> web.Response:
        seen["first"] = request.headers.get("Authorization")
        raise web.HTTPFound(f"http://127.0.0.1:{ports[1]}/file")

    ports: list[int] = []
    runners = []
    for handler in (first, other):
        app = web.Application()
        app.router.add_get("/file", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        ports.append(bound_port(site))

    class Allow:
        allow_hosts: tuple[str, ...] = ()
        allow_networks = (ipaddress.ip_network("127.0.0.0/8"),)

    try:
        got = await fetch(
            f"http://127.0.0.1:{ports[0]}/file",
            allow=Allow(),
            max_bytes=10_000,
            timeout=10,
            headers={"Authorization": "Bearer secret"},
        )
    finally:
        for runner in runners:
            await runner.cleanup()
    assert got.data == PNG
    assert seen == {"first": "Bearer secret", "other": None}


async def test_an_event_whose_handling_failed_before_the_store_is_answered_500_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host.handle` raising before the message is stored: 500, Meta's retry of the same
    wamid is taken, answered 200, and answered once."""
    from chatfn.channels import intake
    from tests.channels.held_model import broker_away

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.0)
    async with FakeWhatsApp() as fake, running(fake, tmp_path) as driver:
        tries = broker_away(driver.bot, monkeypatch, {"once": 1})
        user = "15550009999"
        assert await fake.deliver(fake.text(user, "once")) == 200
        assert fake.webhook_answers == [500, 200]
        await fake.wait_sent(user, 1)
        assert tries == ["once", "once"] and texts(fake, user) == ["echo: once"]
