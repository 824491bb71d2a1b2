"""Voice messages in: a message's audio downloaded, converted and transcribed, so the model hears
what was said (speech to text, `voice.stt`).

Channels hand audio on as references (`IncomingMessage.audio`: `https://...` URLs or
`data:audio/...;base64,` URIs), as they do images. A turn whose message has audio, once it is
admitted (its limits counted), goes through `hear`:

- the platform's own transcript (`IncomingMessage.transcript`), when it gave one: no call;
- else, with `voice.stt.model` set and the chat's `voice.stt` switch on: the first reference
  downloaded through chatfn.common.fetch (internal addresses refused, a deadline, at most
  `voice.stt.max_bytes`), converted to 16 kHz mono WAV by ffmpeg (SILK decoded first:
  chatfn/common/audio.py), its length checked (over `voice.stt.max_seconds`: one short
  sentence, no call), and sent to the OpenAI-compatible `/audio/transcriptions` API through
  the `openai` SDK;
- else the model is told a voice message came that was not transcribed.

The transcript becomes the message's text, shown to the model as the user's words; the
stored row (stored first with a note, as every message is) gets the transcript marked as
spoken (`SPOKEN_MARK`). A failure (a refused URL, audio that does not decode, the STT
provider down) is one short sentence to the user; the message stays stored.
"""

from __future__ import annotations

import base64
import binascii
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chatfn.common.audio import AudioError, to_wav
from chatfn.common.chat_keys import VOICE
from chatfn.common.config import SttSettings
from chatfn.common.fetch import FetchAllow, FetchError, FetchTooLarge, fetch
from chatfn.common.messages import SPOKEN_MARK
from function_calls.model_calls import record_usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from function_calls.context import MessageContext

__all__ = ["AudioError", "fetch_audio", "hear", "spoken_text", "transcribe"]

#: Seconds for downloading one voice message.
FETCH_TIMEOUT = 20.0
# One SDK client per provider (base URL, key, timeout): made on first use.
_clients: dict[tuple[str | None, str, float], AsyncOpenAI] = {}


def _not_a_page(kind: str) -> bool:
    """A Content-Type a voice file may come with: anything but a web page (platforms serve
    voice as audio/*, video/ogg, application/octet-stream, or with none at all)."""
    return not kind.startswith("text/")


def _decode_data_uri(ref: str, max_bytes: int) -> bytes:
    head, _, body = ref.partition(",")
    if ";base64" not in head or not head[5:].startswith(("audio/", "video/ogg")):
        raise AudioError("voice.failed", f"not an audio data URI: {head[:40]}")
    if len(body) > max_bytes * 4 // 3 + 4:
        raise AudioError("voice.failed", f"{len(body)} base64 characters, over {max_bytes} bytes")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise AudioError("voice.failed", "bad base64") from None


async def fetch_audio(ref: str, *, allow: FetchAllow | None, max_bytes: int) -> bytes:
    """The bytes of a voice reference (a URL, fetched through the one fetch door, or a data
    URI); AudioError "voice.failed" for any failure, a refused internal address included (the
    reply does not tell an open internal port from a closed one)."""
    if ref.startswith("data:"):
        return _decode_data_uri(ref, max_bytes)
    try:
        got = await fetch(
            ref, allow=allow, max_bytes=max_bytes, timeout=FETCH_TIMEOUT, accept=_not_a_page
        )
    except FetchTooLarge as exc:
        raise AudioError("voice.failed", f"too large: {exc.detail}") from None
    except FetchError as exc:
        raise AudioError("voice.failed", f"{type(exc).__name__}: {exc}") from None
    return got.data


def _client(stt: SttSettings) -> AsyncOpenAI:
    key = stt.api_key.get_secret_value() if stt.api_key is not None else "none"
    found = _clients.get((stt.base_url, key, stt.timeout))
    if found is None:
        from openai import AsyncOpenAI

        # No retries here: an outage is one short sentence now, not a minute of waiting.
        found = AsyncOpenAI(base_url=stt.base_url, api_key=key, timeout=stt.timeout, max_retries=0)
        _clients[(stt.base_url, key, stt.timeout)] = found
    return found


async def transcribe(stt: SttSettings, wav: bytes) -> str:
    """What is said in `wav` (16 kHz mono WAV), from the `voice.stt` provider's
    `/audio/transcriptions`; AudioError "voice.failed" when the provider fails."""
    import openai

    args: dict[str, Any] = {"model": stt.model, "file": ("voice.wav", wav, "audio/wav")}
    if stt.language:
        args["language"] = stt.language
    try:
        result = await _client(stt).audio.transcriptions.create(**args)
    except openai.OpenAIError as exc:
        raise AudioError("voice.failed", f"speech to text: {type(exc).__name__}: {exc}") from None
    text = result if isinstance(result, str) else getattr(result, "text", "")
    return " ".join(str(text).split())


def spoken_text(text: str, transcript: str) -> str:
    """The message's text once heard: what was typed with it (a caption), then what was said."""
    return f"{text}\n{transcript}".strip() if text.strip() else transcript


async def _transcript(ctx: MessageContext) -> str | None:
    """The message's transcript (the platform's, else the provider's); None: not transcribed
    here (no provider, or the chat switched it off). Raises AudioError."""
    msg = ctx.message
    if msg.transcript:
        return msg.transcript
    stt = ctx.config.voice.stt
    if not stt.enabled or not ctx.chat.get(VOICE).stt:
        return None
    data = await fetch_audio(msg.audio[0], allow=ctx.config.bot.fetch, max_bytes=stt.max_bytes)
    wav, seconds = await to_wav(data, max_seconds=stt.max_seconds)
    ctx.logger.info("voice message of {:.1f} s: transcribing", seconds)
    started = time.monotonic()
    outcome = "ok"
    try:
        return await transcribe(stt, wav)
    except AudioError:
        outcome = "failed"
        raise
    finally:
        _meter(ctx, stt, seconds, time.monotonic() - started, outcome)


def _meter(
    ctx: MessageContext, stt: SttSettings, seconds: float, latency: float, outcome: str
) -> None:
    """A transcription's usage row (its cost from `voice.stt.price_per_minute`)."""
    cost = None
    if stt.price_per_minute is not None and outcome == "ok":
        cost = stt.price_per_minute * seconds / 60
    meter(ctx, "voice.stt", stt.model or "", latency, outcome, cost)


def meter(
    ctx: Any, name: str, model_id: str, latency: float, outcome: str, cost: float | None
) -> None:
    """A speech call's usage row (model_name "voice.stt" or "voice.tts") and limit counts, as
    a model call's: /stats, the console's usage page, `model_calls_per_day` and
    `cost_per_day` see it. `ctx`: the turn's MessageContext."""
    msg = ctx.message
    row: dict[str, object] = dict(
        platform=msg.platform,
        chat_id=msg.chat_id,
        sender_id=msg.sender_id,
        message_id=msg.message_id,
        model_name=name,
        model_id=model_id,
        prompt_tokens=0,
        completion_tokens=0,
        cached_tokens=0,
        cache_write_tokens=0,
        reasoning_tokens=0,
        latency_ms=latency * 1000,
        streamed=False,
        estimated=False,
        outcome=outcome,
        created_at=datetime.now(UTC),
        cost=cost,
        round=None,
        finish_reason=None,
    )
    try:
        record_usage(ctx, row, 0, cost)
    except Exception as exc:  # the record must never take the message down with it
        ctx.logger.error("usage row of {} not written: {}", name, exc)


async def hear(ctx: MessageContext) -> bool:
    """Make the message's voice its text (see the module's note); False when the turn ends
    here (the user was told why in one sentence; the message stays stored)."""
    msg = ctx.message
    if msg.spoken or (not msg.audio and not msg.transcript):
        return True
    try:
        transcript = await _transcript(ctx)
    except AudioError as exc:
        ctx.logger.warning("voice message not transcribed: {}", exc)
        seconds = f"{ctx.config.voice.stt.max_seconds:g}"
        await ctx.reply(ctx.t(exc.key, seconds=seconds), notice=True)
        return False
    if transcript is None:
        return True
    if not transcript and not msg.text.strip():
        ctx.logger.warning("voice message: the transcript is empty")
        await ctx.reply(ctx.t("voice.failed"), notice=True)
        return False
    msg.text = spoken_text(msg.text, transcript)
    msg.spoken = True
    if ctx.stored_id is not None:
        await ctx.turn.storage.run(
            ctx.turn.storage.set_message_text,
            msg.platform,
            msg.chat_id,
            ctx.stored_id,
            SPOKEN_MARK + msg.text,
        )
    return True
