"""Issue 43: the HTTP API's `"audio"` field (like `"images"`): a voice message posted as a
data:audio URI or a URL is transcribed by the voice.stt server (the real openai SDK against the
local audio API) and the model answers the words; a bad reference is refused with its field."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say
from tests.fakes.audio_api import FFMPEG, AudioApi, tone

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


async def _post(tb: TestBot, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    try:
        async with ClientSession() as http:
            resp = await http.post(
                f"http://127.0.0.1:{channel.bound_port}/v1/messages",
                json={"chat_id": "private:alice", "sender_id": "alice", **body},
            )
            return resp.status, await resp.json()
    finally:
        await channel.stop()


def _stt(api: AudioApi) -> dict[str, Any]:
    return {"voice": {"stt": {"base_url": api.base_url, "api_key": api.key, "model": "w"}}}


async def test_http_audio_is_transcribed_and_answered(tmp_path: Path) -> None:
    model = ScriptedModel([say("It is sunny.")])
    voice = "data:audio/ogg;base64," + base64.b64encode(tone(1.5)).decode()
    async with AudioApi(transcripts=["what is the weather"]) as api:
        tb = TestBot(tmp_path, model=model, builtins=False, config=_stt(api))
        try:
            status, out = await _post(tb, {"audio": [voice]})
        finally:
            await tb.aclose()
    assert status == 200, out
    assert out["replies"] == [{"text": "It is sunny.", "at": None}]
    [req] = api.transcriptions
    assert req.format == "wav" and 1.4 < req.seconds < 1.6
    assert str(model.requests[0].messages[-1].content).endswith("what is the weather")


@pytest.mark.parametrize(
    "audio",
    [["file:///etc/passwd"], ["data:text/plain;base64,aGk="], ["https://a/1", "https://a/2"]],
)
async def test_http_bad_audio_is_refused_naming_the_field(tmp_path: Path, audio: list[str]) -> None:
    tb = TestBot(tmp_path, model=ScriptedModel([]), builtins=False)
    try:
        status, out = await _post(tb, {"audio": audio})
    finally:
        await tb.aclose()
    assert status == 400 and out["field"].startswith("audio"), out


async def test_http_reply_carries_its_audio(tmp_path: Path) -> None:
    model = ScriptedModel([say("Spoken and written.")])
    async with AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key, "model": "m"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        tb = TestBot(tmp_path, model=model, builtins=False, config=config)
        try:
            status, out = await _post(tb, {"text": "hello"})
        finally:
            await tb.aclose()
    assert status == 200, out
    [reply] = out["replies"]
    assert reply["text"] == "Spoken and written."
    [voice] = reply["audio"]
    assert voice.startswith("data:audio/ogg;base64,")
    assert base64.b64decode(voice.partition(",")[2]).startswith(b"OggS")
