"""Audio conversion for voice messages, the same on every platform: any format a platform sends
(OGG/Opus, AMR, MP3, M4A, WAV, SILK from QQ and WeChat) to 16 kHz mono WAV for speech to
text, and a spoken reply to the platform's voice format (OGG/Opus for Telegram, SILK for QQ).

Conversion runs ffmpeg from the system (`apt install ffmpeg`), found with `shutil.which`;
SILK is decoded and encoded with the `silk-python` package (`import pysilk`, the `voice`
extra); AMR-NB (WeCom's and DingTalk's voice) is encoded by the system's opencore-amrnb library
(`apt install libopencore-amrnb0`, loaded with ctypes: Debian's ffmpeg decodes AMR but cannot
encode it). A missing tool is an `AudioError` whose message names what to install, and
`missing_tools()` lists them for `chatfn check` and the start-up line.

Every conversion is bounded: ffmpeg reads at most `max_seconds` (plus one) of audio and gets
`TIMEOUT` seconds, so a long or hostile file costs little; the duration is measured on the
decoded samples, not taken from the container's header.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import ctypes
import ctypes.util
import importlib
import importlib.util
import io
import shutil
import wave
from typing import Any

__all__ = [
    "AMR_CHANNELS",
    "SAMPLE_RATE",
    "voice_tools",
    "AudioError",
    "audio_mime",
    "decode_audio_uri",
    "is_silk",
    "missing_tools",
    "split_clips",
    "to_amr",
    "to_mp3",
    "to_ogg_opus",
    "to_silk",
    "to_wav",
    "wav_seconds",
]

#: The channels whose spoken replies are AMR (voice_tools' `amr`).
AMR_CHANNELS = frozenset({"dingtalk", "wecom"})
#: The sample rate of the WAV given to speech to text (what Whisper models use).
SAMPLE_RATE = 16000
#: Seconds one ffmpeg run may take.
TIMEOUT = 60.0
# The rate SILK is decoded at and encoded from (QQ and WeChat voice use 24 kHz).
_SILK_RATE = 24000
_SILK_MAGIC = b"#!SILK_V3"
_FFMPEG_HINT = "ffmpeg is not installed: install it (Debian/Ubuntu: apt install ffmpeg)"
_AMR_HINT = (
    "the AMR-NB encoder is not installed: install it (Debian/Ubuntu: apt install "
    "libopencore-amrnb0)"
)
_SILK_HINT = 'the SILK codec is not installed: pip install "chatfn[voice]" (silk-python)'


class AudioError(Exception):
    """Audio that cannot be used. `key` is the catalogue text for the user ("voice.failed",
    "voice.too_long", "voice.tool_missing"), `detail` what the log says."""

    def __init__(self, key: str, detail: str = "") -> None:
        super().__init__(f"{key}: {detail}" if detail else key)
        self.key = key
        self.detail = detail


def missing_tools(silk: bool = True) -> list[str]:
    """One line per conversion tool that is missing (empty: everything is there)."""
    missing = []
    if shutil.which("ffmpeg") is None:
        missing.append(_FFMPEG_HINT)
    if silk:
        try:
            importlib.import_module("pysilk")
        except ImportError:
            missing.append(_SILK_HINT)
    return missing


_ESPEAK_HINT = "espeak-ng is not installed: install it (Debian/Ubuntu: apt install espeak-ng)"


def voice_tools(
    stt: bool, tts: str | None, fallback: str | None, *, amr: bool = False
) -> list[tuple[str, str]]:
    """(status, line) per conversion tool the `voice:` settings need and lack: "fail" where
    voice cannot work without it, "warn" where only part of it (SILK voice, a fallback, AMR).
    `stt`: voice.stt has a model; `tts`, `fallback`: voice.tts's providers; `amr`: a channel
    whose spoken replies are AMR (WeCom, DingTalk) is configured."""
    if not stt and tts is None:
        return []
    found: list[tuple[str, str]] = []
    if shutil.which("ffmpeg") is None:
        found.append(("fail", _FFMPEG_HINT))
    if stt and importlib.util.find_spec("pysilk") is None:
        found.append(("warn", _SILK_HINT + " (QQ and WeChat voice messages)"))
    if "local" in (tts, fallback) and shutil.which("espeak-ng") is None:
        found.append(("fail" if tts == "local" else "warn", _ESPEAK_HINT))
    if amr and tts is not None and ctypes.util.find_library("opencore-amrnb") is None:
        found.append(("warn", _AMR_HINT + " (spoken replies on WeCom and DingTalk)"))
    return found


def _ffmpeg() -> str:
    found = shutil.which("ffmpeg")
    if found is None:
        raise AudioError("voice.tool_missing", _FFMPEG_HINT)
    return found


def is_silk(data: bytes) -> bool:
    """SILK v3 as QQ and WeChat send it (Tencent's files start with a 0x02 byte)."""
    return data.startswith(_SILK_MAGIC) or data[1:].startswith(_SILK_MAGIC)


def decode_audio_uri(ref: str) -> tuple[str, bytes] | None:
    """A spoken reply's `data:audio/<type>;base64,...` as (its type, its bytes); None for a
    URL or a data URI that is not base64 audio (the channels send the text alone then)."""
    head, _, body = ref.partition(",")
    if not head.startswith("data:audio/") or ";base64" not in head:
        return None
    try:
        return head[len("data:") :].split(";", 1)[0], base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def audio_mime(data: bytes) -> str:
    """The audio type the first bytes say (for a data URI), else application/octet-stream."""
    if data.startswith(b"OggS"):
        return "audio/ogg"
    if data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return "audio/wav"
    if data.startswith(b"ID3") or data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if data.startswith(b"#!AMR"):
        return "audio/amr"
    if data[4:8] == b"ftyp":
        return "audio/mp4"
    if data.startswith(b"fLaC"):
        return "audio/flac"
    if is_silk(data):
        return "audio/silk"
    return "application/octet-stream"


def _silk_module() -> Any:
    try:
        return importlib.import_module("pysilk")
    except ImportError:
        raise AudioError("voice.tool_missing", _SILK_HINT) from None


def _silk_to_pcm(data: bytes) -> bytes:
    """SILK -> 16-bit mono PCM at 24 kHz (blocking: run it on a thread)."""
    pysilk = _silk_module()
    out = io.BytesIO()
    # pysilk wants the file without Tencent's leading 0x02.
    body = data[1:] if data[:1] == b"\x02" else data
    try:
        pysilk.decode(io.BytesIO(body), out, _SILK_RATE)
    except Exception as exc:  # pysilk.SilkError and the C decoder's other complaints
        raise AudioError("voice.failed", f"SILK not decoded: {exc}") from None
    return out.getvalue()


def _pcm_to_wav(pcm: bytes, rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return out.getvalue()


def wav_seconds(data: bytes) -> float:
    """The length of a WAV file, from its samples."""
    with wave.open(io.BytesIO(data), "rb") as w:
        return w.getnframes() / float(w.getframerate() or 1)


async def _run_ffmpeg(args: list[str], data: bytes, timeout: float = TIMEOUT) -> bytes:
    """ffmpeg with `data` on its stdin, its stdout returned; an AudioError when it fails."""
    process = await asyncio.create_subprocess_exec(
        _ffmpeg(),
        "-hide_banner",
        "-loglevel",
        "error",
        "-y",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate(data)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise AudioError("voice.failed", f"ffmpeg took more than {timeout:g} s") from None
    if process.returncode != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise AudioError("voice.failed", f"ffmpeg: {message[-1] if message else 'failed'}")
    return out


async def to_wav(data: bytes, *, max_seconds: float) -> tuple[bytes, float]:
    """`data` (any audio, SILK included) as 16 kHz mono WAV, with its length in seconds.
    At most `max_seconds` + 1 s is decoded: the caller refuses what is longer than
    `max_seconds` (AudioError "voice.too_long" is raised here for it)."""
    cap = f"{max_seconds + 1:g}"
    if is_silk(data):
        pcm = await asyncio.to_thread(_silk_to_pcm, data)
        data = _pcm_to_wav(pcm, _SILK_RATE)
    wav = await _run_ffmpeg(
        ["-i", "pipe:0", "-t", cap, "-vn", "-ac", "1", "-ar", str(SAMPLE_RATE)]
        + ["-c:a", "pcm_s16le", "-f", "wav", "pipe:1"],
        data,
    )
    # ffmpeg cannot seek back on a pipe to fill in the WAV header's sizes: count the samples.
    seconds = _piped_wav_seconds(wav)
    if seconds <= 0:
        raise AudioError("voice.failed", "no audio in the file")
    if seconds > max_seconds:
        raise AudioError("voice.too_long", f"longer than {max_seconds:g} s")
    return _pcm_to_wav(_piped_wav_pcm(wav), SAMPLE_RATE), seconds


def _piped_wav_pcm(wav: bytes) -> bytes:
    """The samples of a WAV ffmpeg wrote to a pipe (its `data` chunk runs to the end)."""
    at = wav.find(b"data", 12)
    if at < 0:
        raise AudioError("voice.failed", "ffmpeg wrote no WAV data")
    return wav[at + 8 :]


def _piped_wav_seconds(wav: bytes) -> float:
    return len(_piped_wav_pcm(wav)) / 2 / SAMPLE_RATE


async def to_ogg_opus(data: bytes) -> bytes:
    """Audio as OGG/Opus mono (Telegram's `sendVoice`, WhatsApp, the web page)."""
    return await _run_ffmpeg(
        ["-i", "pipe:0", "-vn", "-ac", "1", "-ar", "48000", "-c:a", "libopus"]
        + ["-b:a", "32k", "-f", "ogg", "pipe:1"],
        data,
    )


async def to_mp3(data: bytes) -> bytes:
    """Audio as MP3 mono (LINE's audio messages take MP3 or M4A by URL)."""
    return await _run_ffmpeg(
        ["-i", "pipe:0", "-vn", "-ac", "1", "-c:a", "libmp3lame", "-b:a", "48k"]
        + ["-f", "mp3", "pipe:1"],
        data,
    )


async def to_silk(data: bytes) -> bytes:
    """Audio as Tencent SILK v3 (QQ and WeChat voice messages), 24 kHz mono."""
    pcm = await _run_ffmpeg(
        ["-i", "pipe:0", "-vn", "-ac", "1", "-ar", str(_SILK_RATE), "-f", "s16le", "pipe:1"],
        data,
    )
    pysilk = _silk_module()

    def encode() -> bytes:
        out = io.BytesIO()
        pysilk.encode(io.BytesIO(pcm), out, _SILK_RATE, 24000, tencent=True)
        return out.getvalue()

    return await asyncio.to_thread(encode)


# AMR-NB as opencore-amrnb encodes it: 20 ms frames of 160 samples at 8 kHz, mode MR122
# (12.2 kbit/s, the best the codec has), each frame 32 bytes after the file's magic.
_AMR_RATE = 8000
_AMR_FRAME = 160
_AMR_MR122 = 7
_AMR_MAGIC = b"#!AMR\n"


def _amr_library() -> Any:
    name = ctypes.util.find_library("opencore-amrnb")
    if name is None:
        raise AudioError("voice.tool_missing", _AMR_HINT)
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        raise AudioError("voice.tool_missing", _AMR_HINT) from None
    lib.Encoder_Interface_init.restype = ctypes.c_void_p
    lib.Encoder_Interface_init.argtypes = [ctypes.c_int]
    lib.Encoder_Interface_exit.argtypes = [ctypes.c_void_p]
    lib.Encoder_Interface_Encode.restype = ctypes.c_int
    lib.Encoder_Interface_Encode.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_short),
        ctypes.POINTER(ctypes.c_ubyte),
        ctypes.c_int,
    ]
    return lib


def _encode_amr(pcm: bytes) -> bytes:
    """16-bit mono PCM at 8 kHz -> an AMR-NB file (blocking: run it on a thread). The last
    frame is padded with silence."""
    lib = _amr_library()
    state = lib.Encoder_Interface_init(0)
    if not state:
        raise AudioError("voice.failed", "the AMR encoder did not start")
    frame_bytes = _AMR_FRAME * 2
    if len(pcm) % frame_bytes:
        pcm += b"\0" * (frame_bytes - len(pcm) % frame_bytes)
    out = bytearray(_AMR_MAGIC)
    buffer = (ctypes.c_ubyte * 64)()
    try:
        for at in range(0, len(pcm), frame_bytes):
            samples = (ctypes.c_short * _AMR_FRAME).from_buffer_copy(pcm[at : at + frame_bytes])
            size = lib.Encoder_Interface_Encode(state, _AMR_MR122, samples, buffer, 0)
            if size <= 0:
                raise AudioError("voice.failed", "the AMR encoder refused a frame")
            out += bytes(buffer[:size])
    finally:
        lib.Encoder_Interface_exit(state)
    return bytes(out)


async def to_amr(data: bytes) -> bytes:
    """Audio as AMR-NB, 8 kHz mono at 12.2 kbit/s (the only voice WeCom's media/upload takes,
    and the one DingTalk's voice upload takes in every version of its documentation)."""
    _amr_library()  # the missing library named before ffmpeg runs
    pcm = await _run_ffmpeg(
        ["-i", "pipe:0", "-vn", "-ac", "1", "-ar", str(_AMR_RATE), "-f", "s16le", "pipe:1"],
        data,
    )
    if not pcm:
        raise AudioError("voice.failed", "no audio in the file")
    return await asyncio.to_thread(_encode_amr, pcm)


async def split_clips(
    data: bytes, clip_seconds: float, *, max_seconds: float = 600
) -> list[tuple[bytes, float]]:
    """`data` (any audio) as 16 kHz mono WAV clips of at most `clip_seconds` each, with their
    lengths: a platform whose voice messages are short (WeChat, WeCom and DingTalk take 60 s)
    gets a long spoken reply as several in a row instead of a refused upload."""
    wav, _seconds = await to_wav(data, max_seconds=max_seconds)
    pcm = _piped_wav_pcm(wav)
    step = max(int(clip_seconds * SAMPLE_RATE), 1) * 2
    return [
        (_pcm_to_wav(pcm[at : at + step], SAMPLE_RATE), len(pcm[at : at + step]) / 2 / SAMPLE_RATE)
        for at in range(0, len(pcm), step)
    ]
