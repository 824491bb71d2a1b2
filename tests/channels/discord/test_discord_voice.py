"""Issue 43: a Discord voice message (an OGG/Opus attachment, flag IS_VOICE_MESSAGE, from the
CDN) reaches the bot as audio, is transcribed by the voice.stt server and answered; it is not
listed as a file in the text."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("discord")

from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from providers.scripted import ScriptedModel, say  # noqa: E402
from tests.channels.conftest import LOCAL_MEDIA  # noqa: E402
from tests.channels.contract import Chat, contract_registry  # noqa: E402
from tests.channels.discord.discord_driver import DiscordDriver  # noqa: E402
from tests.channels.discord.discord_fake import FakeDiscord  # noqa: E402
from tests.fakes.audio_api import FFMPEG, AudioApi, tone  # noqa: E402

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


async def test_discord_voice_message_is_transcribed(tmp_path: Path) -> None:
    model = ScriptedModel([say("Done.")])
    async with FakeDiscord() as server, AudioApi(transcripts=["ping the team"]) as api:
        driver = DiscordDriver(server)
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'discord.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "dcbot", **LOCAL_MEDIA},
                "channels": {"discord": driver.channel_settings()},
                "voice": {"stt": {"base_url": api.base_url, "api_key": api.key, "model": "w"}},
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
        await driver.attach(bot.channel_host, settings.channels.discord)
        await bot.start()
        try:
            await server.say(None, "", author=1023, dm=True, voice=tone(2.0))
            [sent] = await driver.sent(Chat("private", "1023"), 1)
        finally:
            await driver.detach()
            await bot.aclose()
    assert sent.text == "Done."
    [req] = api.transcriptions
    assert req.format == "wav" and 1.9 < req.seconds < 2.1
    user = str(model.requests[0].messages[-1].content)
    assert user.endswith("ping the team") and "[file:" not in user


async def test_spoken_reply_is_an_ogg_attachment(tmp_path: Path) -> None:
    from tests.fakes.audio_api import probe

    model = ScriptedModel([say("On my way.")])
    async with FakeDiscord() as server, AudioApi() as api:
        driver = DiscordDriver(server)
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key, "model": "m"}
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'discord.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "dcbot"},
                "channels": {"discord": driver.channel_settings()},
                "voice": {"tts": tts},
                "chats": [{"voice": {"tts": "on"}}],
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
        await driver.attach(bot.channel_host, settings.channels.discord)
        await bot.start()
        try:
            await server.say(None, "where are you?", author=1023, dm=True)
            [posted] = await server.wait_sent(server.dm_channel(1023), 1)
        finally:
            await driver.detach()
            await bot.aclose()
    assert posted.payload["content"] == "On my way."
    [(name, data)] = posted.files
    assert name == "voice1.ogg" and data.startswith(b"OggS")
    kind, seconds = probe(data)
    assert kind == "ogg" and seconds > 0.4
