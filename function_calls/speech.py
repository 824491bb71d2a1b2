"""Spoken replies (text to speech, `voice.tts`).

A chat's `voice.tts` switch (`chats:` rules, `/tts on | off | auto`, the console) says which of
the bot's replies are spoken: "off" (the default) none, "on" every reply, "auto" a reply to a
voice message. `MessageContext.reply` asks `speak` for such a reply's audio; the audio goes
with the text as `OutgoingMessage.audio` (a `data:audio/ogg;base64,` URI, OGG/Opus), which a
channel that takes audio sends as its platform's voice message (OneBot `record`, converted to
SILK; Telegram `sendVoice`; the HTTP API's `"audio"`), and a channel that takes none ignores.

Providers: `openai`, an OpenAI-compatible `/audio/speech` through the `openai` SDK (asked for
Opus); `local`, espeak-ng from the system (no key, offline), its WAV converted by ffmpeg. A
`fallback` provider is tried when the first fails. A notice, an empty reply or one longer than
`max_chars` is not spoken; a failure of every provider leaves the text alone (fail soft).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from loguru import logger

from chatfn.common.audio import AudioError, to_ogg_opus
from chatfn.common.chat_keys import VOICE
from chatfn.common.config import CoreSettings, TtsSettings
from chatfn.common.messages import IncomingMessage
from function_calls.chat_settings import ChatSettings

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["speak", "synthesize", "wants_speech"]

_ESPEAK_HINT = "espeak-ng is not installed: install it (Debian/Ubuntu: apt install espeak-ng)"
_clients: dict[tuple[str | None, str, float], AsyncOpenAI] = {}


#: Writes a speech call's usage row: (ctx, "voice.tts", model id, latency, outcome, cost). The
#: context hands `speak` its model door's (function_calls/voice.py `meter`, which may import
#: model_calls; this module may not); None: not metered (a context without a door).
Meter = Callable[[Any, str, str, float, str, float | None], None]


class Replying(Protocol):
    """What `speak` reads of a turn (a MessageContext, which imports this module)."""

    config: CoreSettings
    chat: ChatSettings
    message: IncomingMessage
    logger: Any

    def t(self, key: str, /, **fmt: object) -> str: ...

    async def ask_model(self, prompt: str, *, system: str | None = None) -> Any: ...


SUMMARY_PROMPT = (
    "Shorten the assistant's reply below to at most {limit} characters for reading it aloud: "
    "keep its language, its answer and any numbers, names and times; plain sentences, no "
    "lists, links or markup. Write only the shortened reply."
)


def wants_speech(ctx: Replying) -> bool:
    """Whether this chat's replies to this message are spoken."""
    if ctx.config.voice.tts.provider is None:
        return False
    mode = ctx.chat.get(VOICE).tts
    return mode == "on" or (mode == "auto" and ctx.message.spoken)


def _client(tts: TtsSettings) -> AsyncOpenAI:
    key = tts.api_key.get_secret_value() if tts.api_key is not None else "none"
    found = _clients.get((tts.base_url, key, tts.timeout))
    if found is None:
        from openai import AsyncOpenAI

        found = AsyncOpenAI(base_url=tts.base_url, api_key=key, timeout=tts.timeout, max_retries=0)
        _clients[(tts.base_url, key, tts.timeout)] = found
    return found


async def _openai(tts: TtsSettings, text: str) -> bytes:
    import openai

    args: dict[str, Any] = {
        "model": tts.model,
        "voice": tts.voice or "alloy",
        "input": text,
        "response_format": "opus",
    }
    try:
        response = await _client(tts).audio.speech.create(**args)
        data = await response.aread()
    except openai.OpenAIError as exc:
        raise AudioError("voice.failed", f"text to speech: {type(exc).__name__}: {exc}") from None
    # OpenAI's "opus" is OGG/Opus; a compatible server that answers another format is
    # converted (ffmpeg reads what it is).
    return data if data.startswith(b"OggS") else await to_ogg_opus(data)


async def _local(tts: TtsSettings, text: str) -> bytes:
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        raise AudioError("voice.tool_missing", _ESPEAK_HINT)
    process = await asyncio.create_subprocess_exec(
        espeak,
        "-v",
        tts.voice or "en",
        "--stdout",
        "--stdin",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(tts.timeout):
            wav, err = await process.communicate(text.encode("utf-8"))
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise AudioError("voice.failed", "espeak-ng took too long") from None
    if process.returncode != 0 or not wav:
        raise AudioError("voice.failed", f"espeak-ng: {err.decode('utf-8', 'replace')[-200:]}")
    return await to_ogg_opus(wav)


async def synthesize(tts: TtsSettings, text: str) -> bytes:
    """`text` spoken as OGG/Opus by the configured provider, then its fallback; AudioError
    when none could."""
    providers = [p for p in (tts.provider, tts.fallback) if p is not None]
    error: AudioError | None = None
    for name in dict.fromkeys(providers):
        try:
            return await (_openai(tts, text) if name == "openai" else _local(tts, text))
        except AudioError as exc:
            logger.warning("text to speech by {} failed: {}", name, exc)
            error = exc
    raise error or AudioError("voice.failed", "no voice.tts provider")


async def _shortened(ctx: Replying, text: str, limit: int) -> str | None:
    """`text` summarised by the chat's model within `limit` characters, for speaking; None
    when the model cannot (the reply then goes as text only)."""
    try:
        answer = await ctx.ask_model(text, system=SUMMARY_PROMPT.format(limit=limit))
    except Exception as exc:  # a provider error, a limit reached: the text still goes
        ctx.logger.warning("reply not summarised for speaking: {}", exc)
        return None
    short = " ".join(str(getattr(answer, "content", "") or "").split())
    return short[:limit] or None


async def speak(ctx: Replying, text: str, meter: Meter | None = None) -> tuple[list[str], str]:
    """The audio of a reply for this chat (as `data:audio/ogg;base64,` URIs; [] when it is not
    to be spoken or could not be) and the reply's text (with a note when what is spoken is a
    summary of it: `voice.tts.over_max_chars: summarise`)."""
    tts = ctx.config.voice.tts
    if not text.strip() or not wants_speech(ctx):
        return [], text
    spoken, shown = text, text
    if len(text) > tts.max_chars:
        short = None
        if tts.over_max_chars == "summarise":
            short = await _shortened(ctx, text, tts.max_chars)
        if short is None:
            ctx.logger.info("reply of {} characters, over voice.tts.max_chars: text", len(text))
            return [], text
        spoken, shown = short, f"{text}\n{ctx.t('voice.summarised')}"
    started = time.monotonic()
    try:
        data = await synthesize(tts, spoken)
    except AudioError as exc:
        ctx.logger.warning("reply not spoken: {}", exc)
        _metered(ctx, meter, tts, len(spoken), started, "failed")
        return [], text
    except Exception as exc:  # a bug or an error no provider path names: the text still goes
        ctx.logger.opt(exception=exc).error("reply not spoken: {}", type(exc).__name__)
        _metered(ctx, meter, tts, len(spoken), started, "failed")
        return [], text
    _metered(ctx, meter, tts, len(spoken), started, "ok")
    return ["data:audio/ogg;base64," + base64.b64encode(data).decode()], shown


def _metered(
    ctx: Replying, meter: Meter | None, tts: TtsSettings, chars: int, started: float, outcome: str
) -> None:
    """The usage row of a spoken reply (cost from `voice.tts.price_per_million_chars`)."""
    cost = None
    if tts.price_per_million_chars is not None and outcome == "ok":
        cost = tts.price_per_million_chars * chars / 1_000_000
    if meter is not None:
        model = tts.model if tts.provider == "openai" else "espeak-ng"
        meter(ctx, "voice.tts", model or "", time.monotonic() - started, outcome, cost)
