"""What a user sends and the bot says that is not text, the same on every platform: an image
or a voice a user sent, downloaded by the channel, as the data URI the bot takes (its
download URL usually carries the bot's token, so it is never stored or shown), and a spoken
reply (voice.tts) as OGG/Opus, what most platforms play as a voice message."""

from __future__ import annotations

from collections.abc import Callable

from chatfn.channels.kit.images import MAX_IMAGE_IN, data_uri, image_mime
from chatfn.channels.kit.voice import spoken_audio
from chatfn.common import audio

__all__ = [
    "MAX_VOICE_IN",
    "caption_from",
    "image_uri",
    "is_audio",
    "is_image",
    "opus_voice",
    "spoken_files",
    "voice_uri",
]

#: The largest voice a user sent that is taken for speech to text.
MAX_VOICE_IN = 20 * 1024 * 1024
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".amr", ".flac")


def is_image(mime: str | None, name: str) -> bool:
    """A file a user sent is an image: by the type the platform gives, else its name."""
    return (mime or "").startswith("image/") or name.lower().endswith(_IMAGE_SUFFIXES)


def is_audio(mime: str | None, name: str) -> bool:
    """A file a user sent is a voice message or an audio file: by its type, else its name."""
    return (mime or "").startswith("audio/") or name.lower().endswith(_AUDIO_SUFFIXES)


def image_uri(data: bytes, max_bytes: int = MAX_IMAGE_IN) -> str | None:
    """An image a user sent as a data URI; None when it is not an image (PNG, JPEG, GIF,
    WebP, by its first bytes) or is over `max_bytes` (what a model is given at most)."""
    mime = image_mime(data)
    return None if mime is None or len(data) > max_bytes else data_uri(data, mime)


def voice_uri(data: bytes, mime: str | None = None, max_bytes: int = MAX_VOICE_IN) -> str | None:
    """A voice a user sent as a data URI, for speech to text: its type `mime` when the
    platform names an audio one, else what its first bytes say, else OGG (what voice notes
    are recorded as); None when it is empty or over `max_bytes`."""
    if not data or len(data) > max_bytes:
        return None
    kind = mime if mime and mime.startswith("audio/") else audio.audio_mime(data)
    return data_uri(data, kind if kind.startswith("audio/") else "audio/ogg")


def spoken_files(voice_refs: list[str]) -> list[tuple[str, str, bytes]]:
    """The spoken replies `voice_refs` (audio data URIs) as files for a platform that takes
    any audio file: (name "reply<n>.<type>", type, bytes) each; a URL is left out (the
    platform would not fetch it: the text is the answer)."""
    files = []
    for number, ref in enumerate(voice_refs):
        spoken = audio.decode_audio_uri(ref)
        if spoken is not None:
            mime, data = spoken
            files.append((f"reply{number + 1}.{mime.split('/', 1)[1]}", mime, data))
    return files


async def opus_voice(voice_ref: str, plays: str) -> bytes:
    """The spoken reply `voice_ref` (an audio data URI) as OGG/Opus: as it is when it is
    that already, else converted. ValueError, naming what the platform `plays`, when it is
    not an audio data URI (a URL: the platform would not fetch it); AudioError when it cannot
    be converted. The caller logs either and sends the text alone."""
    data = spoken_audio(voice_ref, plays)
    if data.startswith(b"OggS") and data[28:36] == b"OpusHead":
        return data
    return await audio.to_ogg_opus(data)


def caption_from(parts: list[str], media: bool, fits: Callable[[str], bool]) -> str | None:
    """The last part of a reply's text, taken out of `parts` to go as the caption of its first
    image when the reply has `media` and the part `fits` the platform's caption; else None,
    `parts` left as they are."""
    return parts.pop() if media and parts and fits(parts[-1]) else None
