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
from tests.fakes.audio_api import FFMPEG, AudioApi, probe, tone  # noqa: E402

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


class VoiceTelegram(FakeTelegram):
    """The local Telegram with sendVoice: like the Bot API, a voice must be OGG/Opus (else
    400); what it takes is decoded to check it is real audio."""

    def __init__(self) -> None:
        super().__init__()
        self.voices: list[tuple[int, float]] = []

    async def _api_sendVoice(self, params: dict[str, Any], chat_id: int | None) -> Any:
        from aiohttp import web

        data = params.get("voice")
        if chat_id is None or not isinstance(data, bytes):
            return web.json_response({"ok": False, "error_code": 400}, status=400)
        try:
            kind, seconds = probe(data)
        except ValueError:
            kind, seconds = "?", 0.0
        if kind != "ogg" or not data.startswith(b"OggS"):
            desc = "Bad Request: wrong file type"
            return web.json_response({"ok": False, "error_code": 400, "description": desc})
        self.voices.append((chat_id, seconds))
        await self.notify()
        message = {
            "message_id": 9000 + len(self.voices),
            "from": self.me,
            "chat": {"id": chat_id, "type": "private"},
            "date": 1700000000,
            "voice": {"file_id": "v", "file_unique_id": "v", "duration": int(seconds)},
        }
        return web.json_response({"ok": True, "result": message})


async def test_spoken_reply_goes_out_with_send_voice(tmp_path: Path) -> None:
    async with VoiceTelegram() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key, "model": "m"}
        chats = [{"voice": {"tts": "on"}}]
        async with running(TelegramDriver(fake), tmp_path, voice={"tts": tts}, chats=chats):
            await fake.message(fake.private(1003), "hello")
            [reply] = await fake.wait_sent(1003, 1)
            await fake.wait_for(lambda: bool(fake.voices), 10)
    assert reply.text == "echo: hello"
    [(chat, seconds)] = fake.voices
    assert chat == 1003 and seconds > 0.4
