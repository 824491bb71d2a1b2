"""Issue 43: a OneBot `record` segment (QQ voice: SILK, as NapCat and Lagrange hand it on, by
its download URL or as base64) is transcribed by the voice.stt server and answered; the fake
checks that what it was sent decodes as audio of the voice's length."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chatfn.channels.onebot.channel import OneBotChannel
from chatfn.channels.onebot.message import parse_message
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from function_calls.registry import Registry
from providers.scripted import ScriptedModel, say
from tests.channels.conftest import LOCAL_MEDIA, TOKEN
from tests.channels.onebot.onebot_sim import OneBotSim, plain, text
from tests.channels.onebot.test_onebot import ALICE, SELF
from tests.fakes.audio_api import FFMPEG, AudioApi, silk
from tests.kit import serve

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg is not installed")
VOICE = silk(2.0)


def record(**data: str) -> dict[str, Any]:
    return {"type": "record", "data": {"file": "voice.amr", **data}}


def test_record_segment_is_audio_not_a_placeholder() -> None:
    parsed = parse_message([record(url="https://multimedia.nt.qq.com.cn/download?x=1")], "1")
    assert parsed.audio == ["https://multimedia.nt.qq.com.cn/download?x=1"]
    assert parsed.text == ""
    b64 = parse_message([record(file="base64://AAAA")], "1")
    assert b64.audio == ["data:audio/unknown;base64,AAAA"]
    # Without a reference the model still learns a voice message came.
    assert parse_message([record()], "1").text == "[voice]"


@pytest.fixture
async def voice_files() -> AsyncIterator[str]:
    async def file(_r: web.Request) -> web.Response:
        return web.Response(body=VOICE, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/voice.silk", file)
    runner, port = await serve(app)
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _bot(tmp_path: Path, api: AudioApi, model: ScriptedModel) -> tuple[Bot, OneBotChannel]:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'onebot.db'}"},
            "plugins": {"paths": []},
            "bot": {"name": "simbot", "reply_with_mention": False, **LOCAL_MEDIA},
            "channels": {"onebot": {"host": "127.0.0.1", "port": 0, "access_token": TOKEN}},
            "voice": {"stt": {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(settings, registry=Registry(), model=model, builtins=False, load_plugins=False)
    channel = OneBotChannel(bot.channel_host)
    await channel.start()
    return bot, channel


@pytest.mark.parametrize("how", ["url", "base64"])
async def test_qq_voice_is_transcribed_and_answered(
    tmp_path: Path, voice_files: str, how: str
) -> None:
    model = ScriptedModel([say("明天见")])
    segment = (
        record(url=f"{voice_files}/voice.silk")
        if how == "url"
        else record(file="base64://" + base64.b64encode(VOICE).decode())
    )
    async with AudioApi(transcripts=["明天几点开会"]) as api:
        bot, channel = await _bot(tmp_path, api, model)
        sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
        await sim.connect()
        try:
            await sim.private_message(ALICE, [segment])
            action = await sim.wait_action("send_private_msg")
        finally:
            await sim.close()
            await channel.stop()
            await bot.aclose()
    assert plain(action["params"]["message"]) == "明天见"
    [req] = api.transcriptions
    assert req.format == "wav" and 1.9 < req.seconds < 2.1
    assert str(model.requests[0].messages[-1].content).endswith("明天几点开会")


async def test_voice_with_text_keeps_both(tmp_path: Path, voice_files: str) -> None:
    model = ScriptedModel([say("ok")])
    async with AudioApi(transcripts=["the rest of it"]) as api:
        bot, channel = await _bot(tmp_path, api, model)
        sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
        await sim.connect()
        try:
            await sim.private_message(
                ALICE, [text("listen:"), record(url=f"{voice_files}/voice.silk")]
            )
            await sim.wait_action("send_private_msg")
        finally:
            await sim.close()
            await channel.stop()
            await bot.aclose()
    assert str(model.requests[0].messages[-1].content).endswith("listen:\nthe rest of it")


async def test_spoken_reply_is_a_silk_record_after_the_text(tmp_path: Path) -> None:
    import io

    import pysilk

    model = ScriptedModel([say("Good morning!")])
    async with AudioApi() as api:
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'onebot.db'}"},
                "plugins": {"paths": []},
                "bot": {"name": "simbot", "reply_with_mention": False},
                "channels": {"onebot": {"host": "127.0.0.1", "port": 0, "access_token": TOKEN}},
                "voice": {
                    "tts": {
                        "provider": "openai",
                        "base_url": api.base_url,
                        "api_key": api.key,
                        "model": "tts-1",
                    }
                },
                "chats": [{"voice": {"tts": "on"}}],
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, registry=Registry(), model=model, builtins=False, load_plugins=False)
        channel = OneBotChannel(bot.channel_host)
        await channel.start()
        sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
        await sim.connect()
        try:
            await sim.private_message(ALICE, [text("hello")])
            first, second = await sim.wait_actions(2, "send_private_msg")
        finally:
            await sim.close()
            await channel.stop()
            await bot.aclose()
    assert plain(first["params"]["message"]) == "Good morning!"
    [record] = second["params"]["message"]
    assert record["type"] == "record"
    voice = base64.b64decode(record["data"]["file"].removeprefix("base64://"))
    assert voice.startswith(b"\x02#!SILK_V3")  # Tencent's SILK, what QQ plays
    pcm = io.BytesIO()
    pysilk.decode(io.BytesIO(voice[1:]), pcm, 24000)
    assert len(pcm.getvalue()) / 2 / 24000 > 0.4  # real audio, not an empty file
