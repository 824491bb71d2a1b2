"""A spoken reply (voice.tts) on its way to a platform that plays only voice uploaded as a
file, and only so long a message: the reply cut into clips, each sent as its own voice."""

from __future__ import annotations

from chatfn.common import audio

__all__ = ["spoken_audio", "voice_clips"]


def spoken_audio(voice_ref: str, plays: str) -> bytes:
    """The audio of the spoken reply `voice_ref` (an audio data URI), to convert to what the
    platform plays. ValueError, naming what the platform `plays`, when it is not one (a URL:
    the platform would not fetch it); the caller logs it and sends the text alone."""
    spoken = audio.decode_audio_uri(voice_ref)
    if spoken is None:
        raise ValueError(f"not an audio data URI ({plays})")
    return spoken[1]


async def voice_clips(voice_ref: str, seconds: float, plays: str) -> list[tuple[bytes, float]]:
    """The spoken reply `voice_ref` (an audio data URI) as 16 kHz mono WAV clips of at most
    `seconds`, with their lengths. ValueError, naming what the platform `plays`, when it is
    not an audio data URI (a URL: the platform would not fetch it); AudioError when it cannot
    be converted. The caller logs either and sends the text alone."""
    return await audio.split_clips(spoken_audio(voice_ref, plays), seconds)
