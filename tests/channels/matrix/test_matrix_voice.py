"""Issue 43: an m.audio event's media (Element's voice messages: Ogg/Opus, `mxc://`) is
downloaded with the access token from the authenticated media API as an audio data URI (what
voice.stt transcribes); an image is not taken for audio, nor audio for an image."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytest.importorskip("nio")

from nio import AsyncClient  # noqa: E402

from chatfn.channels.matrix.media import download  # noqa: E402
from tests.fakes.audio_api import FFMPEG, tone  # noqa: E402
from tests.fakes.images import png  # noqa: E402
from tests.kit import serve  # noqa: E402

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


async def test_m_audio_media_is_an_audio_data_uri() -> None:
    voice = tone(1.0)
    seen: list[str] = []

    async def media(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        name = request.match_info["media"]
        body = {"voice": voice, "cat": png()}.get(name)
        if body is None:
            return web.json_response({"errcode": "M_NOT_FOUND"}, status=404)
        # Synapse serves an upload with the type it was given; Element's voice: audio/ogg.
        kind = "audio/ogg" if name == "voice" else "image/png"
        return web.Response(body=body, content_type=kind)

    app = web.Application()
    app.router.add_get("/_matrix/client/v1/media/download/{server}/{media}", media)
    runner, port = await serve(app)
    client = AsyncClient(f"http://127.0.0.1:{port}", "@bot:example.org")
    client.access_token = "syt_token"
    try:
        content = {
            "msgtype": "m.audio",
            "body": "Voice message",
            "url": "mxc://example.org/voice",
            "info": {"mimetype": "audio/ogg", "size": len(voice), "duration": 1000},
            "org.matrix.msc3245.voice": {},
        }
        got = await download(client, content, 20_000_000, "audio")
        assert got is not None and got.startswith("data:audio/ogg;base64,")
        assert base64.b64decode(got.partition(",")[2]) == voice
        assert seen == ["Bearer syt_token"]
        # An image's media is no voice message, and a voice no image.
        cat = {"msgtype": "m.image", "url": "mxc://example.org/cat", "info": {}}
        assert await download(client, cat, 20_000_000, "audio") is None
        assert await download(client, content, 20_000_000) is None
    finally:
        await client.close()
        await runner.cleanup()


@pytest.mark.services
async def test_element_voice_message_is_transcribed_on_synapse(
    synapse: Any, tmp_path: Path
) -> None:
    """End to end on a real Synapse: a person uploads Ogg/Opus and sends Element's voice
    message (m.audio with org.matrix.msc3245.voice); the bot downloads it, voice.stt
    transcribes it, the echo model answers the words."""
    import io

    from nio import UploadResponse

    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings
    from providers.scripted import ScriptedModel, say
    from tests.channels.contract import Chat, contract_registry
    from tests.channels.matrix.matrix_driver import MatrixDriver
    from tests.channels.matrix.matrix_proxy import MatrixProxy
    from tests.fakes.audio_api import AudioApi

    voice = tone(2.0)
    async with MatrixProxy(synapse.url) as proxy, AudioApi(transcripts=["lunch at noon"]) as api:
        driver = await MatrixDriver.create(synapse, proxy, tmp_path / "matrix-store")
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'mx.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "mxbot"},
                "channels": {"matrix": driver.channel_settings()},
                "voice": {"stt": {"base_url": api.base_url, "api_key": api.key, "model": "w"}},
            },
            base_dir=tmp_path,
        )
        model = ScriptedModel([say("See you then.")])
        bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
        try:
            await driver.attach(bot.channel_host, settings.channels.matrix)
            await bot.start()
            chat = Chat("private", "1031")
            await driver.room(chat)
            person = driver.people[chat.native]
            uploaded, _ = await person.client.upload(
                io.BytesIO(voice),
                content_type="audio/ogg",
                filename="voice.ogg",
                filesize=len(voice),
            )
            assert isinstance(uploaded, UploadResponse), uploaded
            content = {
                "msgtype": "m.audio",
                "body": "Voice message",
                "url": uploaded.content_uri,
                "info": {"mimetype": "audio/ogg", "size": len(voice), "duration": 2000},
                "org.matrix.msc3245.voice": {},
            }
            await driver.say_content(chat, content, sender=chat.native)
            [sent] = await driver.sent(chat, 1, timeout=30)
        finally:
            await driver.detach()
            await bot.aclose()
            await driver.close()
    assert sent.text == "See you then."
    [req] = api.transcriptions
    assert req.format == "wav" and 1.9 < req.seconds < 2.1
    assert str(model.requests[0].messages[-1].content).endswith("lunch at noon")


@pytest.mark.services
async def test_spoken_reply_is_an_m_audio_voice_message_on_synapse(
    synapse: Any, tmp_path: Path
) -> None:
    """voice.tts on: the reply's text, then an m.audio voice message whose media, read back
    from Synapse, is the OGG/Opus the audio API's speech became."""
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings
    from providers.scripted import ScriptedModel, say
    from tests.channels.contract import Chat, contract_registry
    from tests.channels.matrix.matrix_driver import MatrixDriver
    from tests.channels.matrix.matrix_proxy import MatrixProxy
    from tests.fakes.audio_api import AudioApi

    async with MatrixProxy(synapse.url) as proxy, AudioApi() as api:
        driver = await MatrixDriver.create(synapse, proxy, tmp_path / "matrix-store")
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key, "model": "m"}
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'mx.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "mxbot"},
                "channels": {"matrix": driver.channel_settings()},
                "voice": {"tts": tts},
                "chats": [{"voice": {"tts": "on"}}],
            },
            base_dir=tmp_path,
        )
        model = ScriptedModel([say("Spoken and written.")])
        bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
        try:
            await driver.attach(bot.channel_host, settings.channels.matrix)
            await bot.start()
            chat = Chat("private", "1032")
            await driver.say(chat, "hello")
            await driver.sent(chat, 2, timeout=30)
            events = await driver.events(chat)
            person = driver.people[chat.native]
            voice = events[1]["content"]
            got = await download(person.client, voice, 20_000_000, "audio")
        finally:
            await driver.detach()
            await bot.aclose()
            await driver.close()
    assert events[0]["content"]["body"] == "Spoken and written."
    assert voice["msgtype"] == "m.audio" and "org.matrix.msc3245.voice" in voice
    assert got is not None and base64.b64decode(got.partition(",")[2]).startswith(b"OggS")
