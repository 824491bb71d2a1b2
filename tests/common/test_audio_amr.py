"""AMR-NB out (chatfn.common.audio.to_amr, for WeCom's and DingTalk's spoken replies): real
audio encoded by the system's opencore-amrnb and decoded back by ffmpeg; long audio split in
clips the platforms' 60 s voice limit takes; a missing encoder named by `chatfn check` where a
channel needs it."""

from __future__ import annotations

import asyncio
import ctypes.util
from pathlib import Path

import pytest

from chatfn.check import Report, check_voice
from chatfn.common import audio
from chatfn.runtime.settings import parse_settings
from tests.fakes.audio_api import FFMPEG, probe, tone

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")


async def test_to_amr_is_amr_of_the_same_length() -> None:
    data = await asyncio.to_thread(tone, 2.0, "ogg")
    amr = await audio.to_amr(data)
    assert amr.startswith(b"#!AMR\n") and audio.audio_mime(amr) == "audio/amr"
    fmt, seconds = probe(amr)
    assert fmt == "amr" and abs(seconds - 2.0) < 0.05
    assert len(amr) < 2 * 32 * 50 + 100  # 12.2 kbit/s: 32 bytes per 20 ms frame


async def test_long_audio_is_split_in_clips() -> None:
    data = await asyncio.to_thread(tone, 130.0, "mp3")
    clips = await audio.split_clips(data, 59)
    assert [round(seconds) for _wav, seconds in clips] == [59, 59, 12]
    assert all(probe(wav)[0] == "wav" for wav, _ in clips)
    with pytest.raises(audio.AudioError, match="too_long"):
        await audio.split_clips(data, 59, max_seconds=100)


async def test_a_missing_amr_encoder_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = await asyncio.to_thread(tone, 1.0, "ogg")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(audio.AudioError, match="libopencore-amrnb0") as caught:
        await audio.to_amr(data)
    assert caught.value.key == "voice.tool_missing"
    tts = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}
    tts |= {"model": "tts-1", "voice": "nova"}
    for channels, warned in (({"wecom": {}}, True), ({"telegram": {}}, False)):
        config = {"voice": {"tts": tts}, "channels": channels, "storage": {"url": "sqlite://"}}
        report = Report()
        check_voice(report, parse_settings(config, base_dir=tmp_path))
        lines = [c.detail for c in report.checks if c.status == "warn"]
        assert (lines == [audio._AMR_HINT + " (spoken replies on WeCom and DingTalk)"]) is warned
