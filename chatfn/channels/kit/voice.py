"""A spoken reply (voice.tts) on its way to a platform that plays only voice uploaded as a
file, and only so long a message: the reply cut into clips, each sent as its own voice. One
that cannot be sent is one warning, and the text is the answer (`unsent`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from chatfn.common import audio
from chatfn.common.messages import DeliveryRefused

__all__ = ["spoken_audio", "unsent", "voice_clips"]


@contextlib.contextmanager
def unsent(
    log: Any, label: str, key: str, also: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Around the sending of a spoken reply to the chat `key`: one that is not an audio data
    URI (ValueError), cannot be converted (AudioError) or is refused (DeliveryRefused, or one
    of the platform's own errors in `also`, raised by its SDK) is one warning on `log`,
    "<label> voice reply to <key> not sent: <why>", and goes no further."""
    caught: tuple[type[Exception], ...] = (audio.AudioError, ValueError, DeliveryRefused, *also)
    try:
        yield
    except caught as exc:
        log.warning("{} voice reply to {} not sent: {}", label, key, exc)


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
