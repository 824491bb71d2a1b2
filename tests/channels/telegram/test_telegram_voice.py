"""Issue 43: Telegram voice notes (OGG/Opus) and audio files are downloaded with getFile (the
file URL holds the token: handed on as a data URI, never stored) and transcribed by the
voice.stt server; the echo model answers the transcript."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("telegram")

from tests.channels.telegram.telegram_driver import TelegramDriver, running  # noqa: E402
from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402
from tests.channels.telegram.test_telegram import stored  # noqa: E402
from tests.fakes.audio_api import FFMPEG, AudioApi, tone  # noqa: E402

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def _media(fake: FakeTelegram, data: bytes, **fields: Any) -> dict[str, Any]:
    file_id = f"AwACAgIAAx-voice-{len(fake.files) + 1}"
    fake.files[file_id] = data
    return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data), **fields}


@pytest.mark.parametrize("kind", ["voice", "audio"])
async def test_telegram_voice_is_transcribed(fake: FakeTelegram, tmp_path: Path, kind: str) -> None:
    data = tone(1.5) if kind == "voice" else tone(1.5, "mp3")
    mime = "audio/ogg" if kind == "voice" else "audio/mpeg"
    chat = fake.private(1003)
    async with AudioApi(transcripts=["turn on the lights"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper-1"}
        async with running(TelegramDriver(fake), tmp_path, voice={"stt": stt}) as bot:
            media = _media(fake, data, duration=2, mime_type=mime)
            await fake.message(chat, None, **{kind: media})
            [reply] = await fake.wait_sent(1003, 1)
            [row] = await stored(bot, "private:1003")
    assert reply.text == "echo: turn on the lights"
    assert row.text == "[voice] turn on the lights"
    assert fake.token not in row.text
    [req] = api.transcriptions
    assert req.format == "wav" and 1.4 < req.seconds < 1.6
