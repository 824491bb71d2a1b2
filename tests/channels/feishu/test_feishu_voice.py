"""Issue 43: a Feishu audio message (Ogg/Opus, its file_key fetched from the message resources
API with type=file and the tenant token) reaches the bot as audio, is transcribed by the
voice.stt server and answered."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lark_oapi")

from chatfn.channels.feishu.parse import read_message  # noqa: E402
from tests.channels.contract import Chat  # noqa: E402
from tests.channels.feishu.feishu_driver import FeishuDriver, running  # noqa: E402
from tests.channels.feishu.feishu_fake import FakeFeishu  # noqa: E402
from tests.fakes.audio_api import FFMPEG, AudioApi, tone  # noqa: E402

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


def test_audio_message_is_read_as_its_file_key() -> None:
    message = {"message_type": "audio", "content": '{"file_key": "file_v3_1", "duration": 900}'}
    read = read_message(message, "ou_bot")
    assert read.audio_keys == ["file_v3_1"] and read.text == ""


async def test_feishu_voice_is_transcribed(tmp_path: Path) -> None:
    async with FakeFeishu() as fake, AudioApi(transcripts=["周五之前发报告"]) as api:
        driver = FeishuDriver(fake)
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(driver, tmp_path, voice={"stt": stt}):
            chat = Chat("private", "1003")
            native = driver.native(chat)
            await fake.push(fake.message_event(native, "ou_1003", group=False, voice=tone(2.0)))
            [sent] = await driver.sent(chat, 1)
    assert sent.text == "echo: 周五之前发报告"
    assert "messages.resources" in fake.calls
    [req] = api.transcriptions
    assert req.format == "wav" and 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_to_feishu_as_an_audio_message(tmp_path: Path) -> None:
    """`/tts on` in a Feishu chat: the reply's card, then its voice as Feishu takes audio: an
    im/v1/files upload of file_type opus in OGG/Opus (the fake refuses other formats) with its
    length, and an `audio` message carrying the file_key. The upload decodes to the spoken
    length."""
    from tests.fakes.audio_api import probe

    async with FakeFeishu() as fake, AudioApi() as api:
        driver = FeishuDriver(fake)
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        async with running(driver, tmp_path, voice={"tts": tts}, chats=[{"voice": {"tts": "on"}}]):
            chat = Chat("private", "1004")
            await driver.say(chat, "read this aloud")
            posted = await fake.wait_sent(driver.native(chat), 2, 15)
    card, voice = posted
    assert card.msg_type == "interactive" and voice.msg_type == "audio"
    kind, data, duration = fake.files[voice.content["file_key"]]
    assert kind == "opus" and data.startswith(b"OggS")
    fmt, seconds = probe(data)
    assert "ogg" in fmt and seconds > 0.5
    assert abs(int(duration) - seconds * 1000) < 300  # the length it was given, in ms
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
