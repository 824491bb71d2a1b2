"""A local OpenAI-compatible audio server, and real audio made for tests with ffmpeg.

`AudioApi` speaks the two endpoints chatfn uses as OpenAI documents them
(https://platform.openai.com/docs/api-reference/audio):

- `POST /v1/audio/transcriptions`: multipart form with `model`, `file` (the audio), optional
  `language`, `response_format`; answers `{"text": ...}` with the next scripted transcript.
  Like the real API it refuses (400) a request without a model or a file, and a file that is
  not audio: the file is decoded with ffmpeg, and its length and format are recorded.
- `POST /v1/audio/speech`: JSON with `model`, `input`, `voice`, `response_format`; answers a
  real tone of the asked format (made by ffmpeg), refusing a missing model, input or voice.

Both check the bearer key, and `fail` makes the next requests answer 500 (an outage).
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import wave
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.kit import serve

FFMPEG = shutil.which("ffmpeg")


def tone(seconds: float, fmt: str = "ogg", frequency: int = 440) -> bytes:
    """A real sine tone of `seconds`, encoded as `fmt` (ogg: Opus, mp3, wav, speex: Speex in
    Ogg as WeChat's `speex` voices...; Debian's ffmpeg decodes AMR but has no AMR encoder)."""
    assert FFMPEG is not None, "ffmpeg is needed for the voice tests"
    codec = {
        "ogg": ["-c:a", "libopus"],
        "wav": ["-c:a", "pcm_s16le"],
        "speex": ["-c:a", "libspeex", "-ar", "16000", "-ac", "1"],
        # M4A as LINE and phones send it; a pipe has no seek: the index goes first
        "m4a": ["-c:a", "aac", "-movflags", "frag_keyframe+empty_moov"],
    }.get(fmt, [])
    rate = ["-ar", "8000", "-ac", "1"] if fmt == "amr" else []
    container = {"speex": "ogg", "m4a": "ipod"}.get(fmt, fmt)
    return subprocess.run(
        [FFMPEG, "-hide_banner", "-loglevel", "error", "-f", "lavfi"]
        + ["-i", f"sine=frequency={frequency}:duration={seconds}", *rate, *codec]
        + ["-f", container, "pipe:1"],
        check=True,
        capture_output=True,
    ).stdout


def silk(seconds: float) -> bytes:
    """A real SILK v3 voice message (Tencent's form, as QQ and WeChat send), made with the silk
    package's own encoder from a tone."""
    import pysilk

    assert FFMPEG is not None
    pcm = subprocess.run(
        [FFMPEG, "-hide_banner", "-loglevel", "error", "-f", "lavfi"]
        + ["-i", f"sine=frequency=330:duration={seconds}", "-ac", "1", "-ar", "24000"]
        + ["-f", "s16le", "pipe:1"],
        check=True,
        capture_output=True,
    ).stdout
    out = io.BytesIO()
    pysilk.encode(io.BytesIO(pcm), out, 24000, 24000, tencent=True)
    return out.getvalue()


def probe(data: bytes) -> tuple[str, float]:
    """(format name, seconds) of audio as ffmpeg decodes it; raises ValueError when it is not
    audio ffmpeg can read."""
    assert FFMPEG is not None
    run = subprocess.run(
        [FFMPEG, "-hide_banner", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", "16000"]
        + ["pipe:1"],
        input=data,
        capture_output=True,
    )
    if run.returncode != 0 or not run.stdout:
        raise ValueError(run.stderr.decode("utf-8", "replace")[-300:])
    header = run.stderr.decode("utf-8", "replace")
    kind = header.split("Input #0, ", 1)[1].split(",", 1)[0] if "Input #0, " in header else "?"
    return kind, len(run.stdout) / 2 / 16000


class VoiceRefused(ValueError):
    """A voice upload a platform refuses; `what` is "size", "format" or "length" (each
    platform answers those with its own code)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(why)
        self.what = what


def voice_upload(
    data: bytes, formats: tuple[str, ...], max_bytes: int, max_seconds: float
) -> float:
    """The length of a voice file a platform's upload takes, decoded by ffmpeg; VoiceRefused
    naming why it refuses one that is empty, over `max_bytes`, not in one of `formats`
    (ffmpeg's names: "amr", "mp3", "ogg"...) or longer than `max_seconds`."""
    if len(data) <= 5 or len(data) > max_bytes:
        raise VoiceRefused("size", f"{len(data)} bytes, not within 6 to {max_bytes}")
    try:
        kind, seconds = probe(data)
    except ValueError as exc:
        raise VoiceRefused("format", f"not audio: {exc}") from None
    if kind not in formats:
        raise VoiceRefused("format", f"{kind} audio, not {' or '.join(formats)}")
    if seconds > max_seconds:
        raise VoiceRefused("length", f"{seconds:.1f} s, over {max_seconds:g} s")
    return seconds


@dataclass
class Transcription:
    model: str
    language: str | None
    filename: str
    content_type: str
    format: str
    seconds: float
    fields: dict[str, str]


@dataclass
class AudioApi:
    """The local audio API; `transcripts` are answered in order (the last repeats)."""

    transcripts: list[str] = field(default_factory=lambda: ["hello from a voice message"])
    key: str = "test-key"
    fail: int = 0
    transcriptions: list[Transcription] = field(default_factory=list)
    speeches: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    speech_seconds: float | None = None  # the spoken length, else from the input's length
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> AudioApi:
        app = web.Application(client_max_size=30 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
        self._runner, self.port = await serve(app)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _refuse(self, status: int, message: str) -> web.Response:
        self.refused.append(message)
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error"}}, status=status
        )

    def _check(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return self._refuse(401, "Incorrect API key provided")
        if self.fail:
            self.fail -= 1
            return web.json_response({"error": {"message": "overloaded"}}, status=500)
        return None

    async def _transcribe(self, request: web.Request) -> web.Response:
        bad = self._check(request)
        if bad is not None:
            return bad
        if not request.content_type.startswith("multipart/form-data"):
            return self._refuse(400, f"expected multipart/form-data, got {request.content_type}")
        fields: dict[str, str] = {}
        audio: bytes | None = None
        filename = content_type = ""
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.name == "file":
                filename = part.filename or ""
                content_type = part.headers.get("Content-Type", "")
                audio = bytes(await part.read())  # type: ignore[union-attr]
            else:
                fields[str(part.name)] = await part.text()  # type: ignore[union-attr]
        if "model" not in fields:
            return self._refuse(400, "you must provide a model parameter")
        if audio is None or not filename:
            return self._refuse(400, "you must provide a file")
        try:
            kind, seconds = await asyncio.to_thread(probe, audio)
        except ValueError as exc:
            return self._refuse(400, f"Invalid file format: {exc}")
        self.transcriptions.append(
            Transcription(
                fields["model"],
                fields.get("language"),
                filename,
                content_type,
                kind,
                seconds,
                fields,
            )
        )
        text = self.transcripts.pop(0) if len(self.transcripts) > 1 else self.transcripts[0]
        if fields.get("response_format") == "text":
            return web.Response(text=text)
        return web.json_response({"text": text})

    async def _speak(self, request: web.Request) -> web.Response:
        bad = self._check(request)
        if bad is not None:
            return bad
        body = await request.json()
        for key in ("model", "input", "voice"):
            if not body.get(key):
                return self._refuse(400, f"you must provide {key}")
        fmt = body.get("response_format") or "mp3"
        if fmt not in ("mp3", "opus", "aac", "flac", "wav", "pcm"):
            return self._refuse(400, f"response_format {fmt!r} is not supported")
        self.speeches.append(body)
        seconds = self.speech_seconds or min(10.0, 0.5 + len(body["input"]) / 40)
        data = await asyncio.to_thread(tone, seconds, {"opus": "ogg"}.get(fmt, fmt))
        kind = {"mp3": "audio/mpeg", "opus": "audio/ogg", "wav": "audio/wav"}.get(fmt, "audio/*")
        return web.Response(body=data, content_type=kind)


def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data), "rb") as w:
        return w.getnframes() / w.getframerate()
