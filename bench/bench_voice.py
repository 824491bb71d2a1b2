"""The latency a voice turn adds (issue 43): the same one-turn conversation typed, spoken in
(speech to text), and answered aloud (text to speech with the local engine).

A TestBot with a scripted model that answers at once, so what is measured is chatfn's part:

- typed: a text message, a text reply (the baseline);
- voice in: a 3 s OGG/Opus voice message as a data URI -> decoded and resampled by ffmpeg ->
  the local OpenAI-compatible audio server (tests/fakes/audio_api.py: it decodes the WAV with
  ffmpeg to check it, then answers a fixed transcript; no speech model runs here, so a real
  STT server's inference time comes on top) -> the model -> a text reply;
- voice out: a text message whose reply (about 60 characters) is spoken by espeak-ng and
  encoded to OGG/Opus by ffmpeg (`voice.tts.provider: local`), all of it real.

    python bench/bench_voice.py --turns 20
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatfn.common.messages import IncomingMessage, OutgoingMessage  # noqa: E402
from chatfn.testing import TestBot  # noqa: E402
from providers.scripted import ScriptedModel, say  # noqa: E402
from tests.fakes.audio_api import AudioApi, tone  # noqa: E402

REPLY = "The meeting moved to nine tomorrow morning, in room two."
_ids = itertools.count(1)


async def _turn(tb: TestBot, text: str, audio: list[str]) -> tuple[float, list[OutgoingMessage]]:
    msg = IncomingMessage(
        platform="bench",
        chat_id="private:alice",
        sender_id="alice",
        sender_name="alice",
        text=text,
        message_id=f"b{next(_ids)}",
        audio=audio,
    )

    async def collect(_out: OutgoingMessage) -> None:
        return None

    started = time.perf_counter()
    sent = await tb.bot.handle(msg, collect)
    return (time.perf_counter() - started) * 1000, sent


async def _run(kind: str, turns: int, api: AudioApi, folder: Path) -> list[float]:
    config: dict[str, Any] = {
        "voice": {
            "stt": {"base_url": api.base_url, "api_key": api.key, "model": "whisper-1"},
            "tts": {"provider": "local", "voice": "en"},
        },
        "bot": {"history_size": 0},
    }
    if kind == "voice out":
        config["chats"] = [{"voice": {"tts": "on"}}]
    model = ScriptedModel([say(REPLY)], repeat_last=True)
    tb = TestBot(folder / kind.replace(" ", "_"), model=model, config=config)
    voice = "data:audio/ogg;base64," + base64.b64encode(tone(3.0)).decode()
    times = []
    try:
        for _ in range(turns + 2):  # two warm-up turns
            ms, sent = await _turn(
                tb, "" if kind == "voice in" else "hi", [voice] if kind == "voice in" else []
            )
            assert sent and sent[-1].text == REPLY, sent
            assert (kind == "voice out") == bool(sent[-1].audio)
            times.append(ms)
    finally:
        await tb.aclose()
    return times[2:]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with AudioApi(transcripts=["when is the meeting"]) as api:
            results = {}
            for kind in ("typed", "voice in", "voice out"):
                (folder / kind.replace(" ", "_")).mkdir()
                results[kind] = await _run(kind, args.turns, api, folder)
    base = statistics.median(results["typed"])
    print(f"{'turn':<10} {'p50 ms':>8} {'p90 ms':>8} {'added p50':>10}")
    for kind, times in results.items():
        p50 = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{kind:<10} {p50:8.1f} {p90:8.1f} {p50 - base:10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
