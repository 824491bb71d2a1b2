"""Issue 43, speech to text: a voice message's audio is fetched, converted (SILK too) and
transcribed by an OpenAI-compatible `/audio/transcriptions` server through the real openai SDK;
the transcript reaches the model as the user's words and the history marks it as spoken."""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chatfn.common.audio import decode_audio_uri, is_silk
from chatfn.common.messages import SPOKEN_MARK, IncomingMessage, OutgoingMessage
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say
from tests.fakes.audio_api import FFMPEG, AudioApi, silk, tone
from tests.kit import serve

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")

_ids = itertools.count(1)


def _config(api: AudioApi, **stt: Any) -> dict[str, Any]:
    return {
        "voice": {
            "stt": {
                "base_url": api.base_url,
                "api_key": api.key,
                "model": "whisper-1",
                "language": "en",
                **stt,
            }
        },
        "models": {"scripted": {"provider": "openai", "model": "x", "api_key": "k"}},
    }


def _voice(
    audio: list[str], text: str = "", transcript: str | None = None, chat: str = "alice"
) -> IncomingMessage:
    return IncomingMessage(
        platform="test",
        chat_id=f"private:{chat}",
        sender_id=chat,
        sender_name=chat,
        text=text,
        message_id=f"v{next(_ids)}",
        audio=audio,
        transcript=transcript,
    )


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


async def _send(tb: TestBot, msg: IncomingMessage) -> list[OutgoingMessage]:
    async def collect(_out: OutgoingMessage) -> None:
        return None

    return await tb.bot.handle(msg, collect)


async def _history(tb: TestBot, chat: str = "alice") -> list[str]:
    rows = await tb.bot.storage.run(tb.bot.storage.recent_messages, "test", f"private:{chat}", 10)
    return [r.text for r in rows]


def _last_user(model: ScriptedModel) -> str:
    return str(model.requests[-1].messages[-1].content)


async def test_voice_message_is_transcribed_and_heard_by_the_model(tmp_path: Path) -> None:
    model = ScriptedModel([say("got it"), say("second")])
    async with AudioApi(transcripts=["remind me to buy milk"]) as api:
        tb = TestBot(tmp_path, model=model, config=_config(api))
        try:
            sent = await _send(tb, _voice([data_uri(tone(2.0), "audio/ogg")]))
            assert [m.text for m in sent] == ["got it"]
            # The multipart request the openai SDK sent: model, language and a real WAV file.
            [req] = api.transcriptions
            assert (req.model, req.language) == ("whisper-1", "en")
            assert req.filename == "voice.wav" and req.format == "wav"
            assert 1.9 < req.seconds < 2.1
            # The model heard the words, as the user's, without the mark.
            assert _last_user(model).endswith("remind me to buy milk")
            assert SPOKEN_MARK not in _last_user(model)
            history = await _history(tb)
            assert SPOKEN_MARK + "remind me to buy milk" in history
            # On the next turn the spoken message is history, shown as the user's words.
            await tb.send("and eggs")
            earlier = [str(m.content) for m in model.requests[-1].messages]
            assert "remind me to buy milk" in earlier
            assert not any(SPOKEN_MARK in text for text in earlier)
        finally:
            await tb.bot.aclose()


async def test_silk_voice_from_a_url_is_decoded(tmp_path: Path) -> None:
    voice = silk(1.5)
    assert is_silk(voice)
    served: list[str] = []

    async def file(request: web.Request) -> web.Response:
        served.append(request.path)
        return web.Response(body=voice, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/voice.silk", file)
    runner, port = await serve(app)
    model = ScriptedModel([say("ok")])
    async with AudioApi(transcripts=["你好"]) as api:
        config = _config(api, language="zh")
        config["bot"] = {"fetch": {"allow_networks": ["127.0.0.0/8"]}}
        tb = TestBot(tmp_path, model=model, config=config)
        try:
            await _send(tb, _voice([f"http://127.0.0.1:{port}/voice.silk"]))
            assert served == ["/voice.silk"]
            [req] = api.transcriptions
            assert req.language == "zh" and 1.4 < req.seconds < 1.6
            assert _last_user(model).endswith("你好")
        finally:
            await tb.bot.aclose()
            await runner.cleanup()


async def test_too_long_voice_gets_a_sentence_and_no_stt_call(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with AudioApi() as api:
        tb = TestBot(tmp_path, model=model, config=_config(api, max_seconds=2))
        try:
            sent = await _send(tb, _voice([data_uri(tone(4.0, "mp3"), "audio/mpeg")]))
            assert len(sent) == 1 and "longer than 2 seconds" in sent[0].text
            assert sent[0].notice
            assert api.transcriptions == [] and model.requests == []
            # The message is kept (with its voice note).
            assert any("[voice: audio/mpeg" in t for t in await _history(tb))
        finally:
            await tb.bot.aclose()


async def test_internal_audio_url_is_refused_by_fetch(tmp_path: Path) -> None:
    asked: list[str] = []

    async def file(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.Response(body=tone(1.0), content_type="audio/ogg")

    app = web.Application()
    app.router.add_get("/secret.ogg", file)
    runner, port = await serve(app)
    model = ScriptedModel([])
    async with AudioApi() as api:
        tb = TestBot(tmp_path, model=model, config=_config(api))  # no bot.fetch allowance
        try:
            sent = await _send(tb, _voice([f"http://127.0.0.1:{port}/secret.ogg"]))
            assert [m.text for m in sent] == [
                "I could not understand that voice message. Please try again or type it."
            ]
            assert asked == [] and api.transcriptions == [] and model.requests == []
        finally:
            await tb.bot.aclose()
            await runner.cleanup()


async def test_stt_outage_is_one_sentence_and_the_message_is_kept(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with AudioApi(fail=1) as api:
        tb = TestBot(tmp_path, model=model, config=_config(api))
        try:
            sent = await _send(tb, _voice([data_uri(tone(1.0), "audio/ogg")]))
            assert len(sent) == 1 and "could not understand" in sent[0].text
            assert model.requests == []
            assert any(t.startswith("[voice: audio/ogg") for t in await _history(tb))
        finally:
            await tb.bot.aclose()


async def test_not_audio_is_refused(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with AudioApi() as api:
        tb = TestBot(tmp_path, model=model, config=_config(api))
        try:
            sent = await _send(tb, _voice([data_uri(b"not audio at all" * 50, "audio/ogg")]))
            assert "could not understand" in sent[0].text
            assert api.transcriptions == []
        finally:
            await tb.bot.aclose()


async def test_platform_transcript_is_used_without_a_call(tmp_path: Path) -> None:
    model = ScriptedModel([say("fine")])
    async with AudioApi() as api:
        tb = TestBot(tmp_path, model=model, config=_config(api))
        try:
            msg = _voice(["https://platform.example/v.ogg"], transcript="what is the time")
            await _send(tb, msg)
            assert api.transcriptions == []
            assert _last_user(model).endswith("what is the time")
            assert SPOKEN_MARK + "what is the time" in await _history(tb)
        finally:
            await tb.bot.aclose()


async def test_chat_switched_off_gets_the_note_only(tmp_path: Path) -> None:
    model = ScriptedModel([say("I cannot listen here")])
    async with AudioApi() as api:
        config = _config(api)
        config["chats"] = [{"match": {"chat_id": "private:alice"}, "voice": {"stt": False}}]
        tb = TestBot(tmp_path, model=model, config=config)
        try:
            await _send(tb, _voice([data_uri(tone(1.0), "audio/ogg")]))
            assert api.transcriptions == []
            assert _last_user(model).endswith("[voice message, not transcribed]")
        finally:
            await tb.bot.aclose()


async def test_bad_chat_voice_value_names_its_key(tmp_path: Path) -> None:
    from chatfn.common.config import ConfigError

    with pytest.raises(ConfigError, match=r"chats\.0\.voice\.stt|chats\[0\]\.voice"):
        TestBot(tmp_path, config={"chats": [{"voice": {"stt": "sometimes"}}]})


async def test_missing_ffmpeg_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ffmpeg on the PATH: `chatfn check` fails naming what to install, and a voice
    message gets one sentence (no STT call)."""
    from chatfn.check import Report, check_voice
    from chatfn.runtime.settings import parse_settings

    async with AudioApi() as api:
        config = _config(api)
        settings = parse_settings({**config, "storage": {"url": "sqlite://"}}, base_dir=tmp_path)
        report = Report()
        check_voice(report, settings)
        assert [c.status for c in report.checks] == ["ok"]
        monkeypatch.setenv("PATH", str(tmp_path))  # no ffmpeg there
        report = Report()
        check_voice(report, settings)
        [line] = [c for c in report.checks if c.status == "fail"]
        assert "ffmpeg is not installed" in line.detail and "apt install ffmpeg" in line.detail
        model = ScriptedModel([])
        tb = TestBot(tmp_path, model=model, config=config)
        try:
            sent = await _send(tb, _voice([data_uri(b"OggS" + b"\0" * 200, "audio/ogg")]))
        finally:
            await tb.bot.aclose()
    assert [m.text for m in sent] == [
        "I cannot listen to voice messages here (an audio tool is missing)."
    ]
    assert api.transcriptions == [] and model.requests == []


async def test_transcription_is_metered_like_a_model_call(tmp_path: Path) -> None:
    """A usage row "voice.stt" with its cost by the minute; it counts against cost_per_day, so
    the next message over the budget is refused."""
    from sqlalchemy import select

    from chatfn.storage.models import usage_table as usage

    model = ScriptedModel([say("noted")])
    async with AudioApi(transcripts=["a long story"]) as api:
        config = _config(api, price_per_minute=0.6)
        config["limits"] = {"per_user": {"cost_per_day": 0.01}}
        tb = TestBot(tmp_path, model=model, config=config)
        try:
            await _send(tb, _voice([data_uri(tone(2.0), "audio/ogg")]))

            def rows() -> list[Any]:
                with tb.bot.storage.engine.connect() as conn:
                    query = select(usage.c.model_name, usage.c.model_id, usage.c.cost)
                    return list(conn.execute(query.order_by(usage.c.id)))

            found = await tb.bot.storage.run(rows)
            stt = [r for r in found if r.model_name == "voice.stt"]
            assert [(r.model_id, round(r.cost, 4)) for r in stt] == [("whisper-1", 0.02)]
            refused = await tb.send("and then?")
            assert len(refused) == 1 and "limit" in refused[0].lower()
            assert len(model.requests) == 1
        finally:
            await tb.bot.aclose()


def test_a_spoken_reply_data_uri_is_decoded_or_left_out() -> None:
    """What the channels send as voice: a base64 audio data URI; a URL, another kind of data
    URI or broken base64 is None (the text goes alone)."""
    assert decode_audio_uri("data:audio/ogg;base64,T2dnUw==") == ("audio/ogg", b"OggS")
    assert decode_audio_uri("data:audio/mpeg;codecs=mp3;base64,SUQz") == ("audio/mpeg", b"ID3")
    assert decode_audio_uri("https://cdn.example/v.ogg") is None
    assert decode_audio_uri("data:image/png;base64,iVBORw==") is None
    assert decode_audio_uri("data:audio/ogg,OggS") is None  # not base64
    assert decode_audio_uri("data:audio/ogg;base64,!!!") is None
