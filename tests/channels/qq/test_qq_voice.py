"""Issue 43: a QQ voice message (an attachment of content_type "voice", with QQ's WAV at
`voice_wav_url` and its speech recognition in `asr_refer_text`): QQ's own transcript is used
without an STT call; without one, the WAV is fetched and transcribed by voice.stt."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from chatfn.channels.qq.channel import voice_of
from tests.channels.conftest import LOCAL_MEDIA
from tests.channels.contract import Chat
from tests.channels.qq.qq_driver import QQDriver, running
from tests.channels.qq.qq_fake import FakeQQ
from tests.fakes.audio_api import FFMPEG, AudioApi, tone
from tests.kit import until

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


def _voice(fake: FakeQQ, said: str = "") -> dict[str, Any]:
    """A voice attachment as QQ sends it (a SILK file by `url`, its WAV by `voice_wav_url`)."""
    attachment = fake.attachment(tone(2.0, "wav"))
    name = attachment["filename"]
    attachment.update(
        content_type="voice",
        filename=f"{uuid.uuid4().hex}.amr",
        url="multimedia.nt.qq.com.cn/download?appid=1402&fileid=x",  # no scheme, as QQ's are
        voice_wav_url=f"{fake.base}/files/{name}",
        asr_refer_text=said,
    )
    return attachment


def test_voice_attachment_is_read() -> None:
    audio, said = voice_of(
        [{"content_type": "voice", "url": "//cdn.example/v.amr", "asr_refer_text": " hi "}]
    )
    assert audio == ["https://cdn.example/v.amr"] and said == "hi"
    assert voice_of([{"content_type": "image/png", "url": "https://x/a.png"}]) == ([], None)


@pytest.mark.parametrize("qq_heard", ["明天下午三点", ""])
async def test_qq_voice_message_is_answered(tmp_path: Path, qq_heard: str) -> None:
    async with FakeQQ() as fake, AudioApi(transcripts=["帮我订会议室"]) as api:
        driver = QQDriver(fake)
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(driver, tmp_path, bot=LOCAL_MEDIA, voice={"stt": stt}):
            chat = Chat("private", "u42")
            scene, target = driver.where(chat)
            kind = "C2C_MESSAGE_CREATE"
            event = fake.message_event(
                kind, target=target, sender=target, content="", attachments=[_voice(fake, qq_heard)]
            )
            await fake.push(kind, event)
            [sent] = await driver.sent(chat, 1)
    expected = qq_heard or "帮我订会议室"
    assert sent.text == f"echo: {expected}"
    if qq_heard:
        assert api.transcriptions == []  # QQ's own transcript: no STT call
    else:
        [req] = api.transcriptions
        assert req.format == "wav" and 1.9 < req.seconds < 2.1


@pytest.mark.parametrize("scene", ["private", "group"])
async def test_a_spoken_reply_goes_to_qq_as_a_silk_voice_message(
    tmp_path: Path, scene: str
) -> None:
    """`/tts on` in a QQ chat: the reply's text, then its voice as QQ takes it: a rich-media
    upload of `file_type` 3 in SILK (the fake refuses any other) and a msg_type 7 message, a
    passive reply with its own msg_seq. The voice decodes to audio of the spoken length."""
    from chatfn.common.audio import _silk_to_pcm

    async with FakeQQ() as fake, AudioApi() as api:
        driver = QQDriver(fake)
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(driver, tmp_path, bot=LOCAL_MEDIA, **config):
            chat = Chat(scene, "c2c42" if scene == "private" else "grp7")
            await driver.say(chat, "read this aloud", mention=True)
            [sent] = await driver.sent(chat, 1)
            where = driver.where(chat)
            await until(
                lambda: any((s, t) == where for s, t, _v in fake.voices), 10, "no voice sent"
            )
    assert sent.text.endswith("read this aloud")
    [(got_scene, target, voice)] = fake.voices
    assert (got_scene, target) == where
    assert isinstance(voice, bytes)
    pcm = _silk_to_pcm(voice)  # SILK that decodes: 24 kHz 16-bit mono
    assert len(pcm) > 24000 * 2 * 0.5
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
    # the voice went as a passive reply: msg_id with a msg_seq after the text's
    text_post, voice_post = [p.body for p in fake.sent_to(*where)]
    assert voice_post["msg_type"] == 7 and voice_post["msg_id"] == text_post["msg_id"]
    assert voice_post["msg_seq"] > text_post["msg_seq"]
