"""The Satori channel beyond the contract: events missed while the stream was down come after
IDENTIFY with the last `sn`; two platforms through one server kept apart (each answered as
its own login); `platform` answers one of them; element escaping and parsing; the server's
refusals (over-long, malformed elements, an unknown login); `chatfn check`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from chatfn.channels.satori import check
from chatfn.channels.satori.elements import escape, parse, to_satori
from chatfn.channels.satori.send import parse_chat_id, render_parts
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from tests.channels.contract import _echo, contract_registry
from tests.channels.held_model import HeldModel
from tests.channels.satori.satori_driver import SatoriDriver, read
from tests.channels.satori.satori_fake import DIRECT, FakeSatori
from tests.kit import until


@asynccontextmanager
async def running(
    fake: FakeSatori,
    tmp_path: Path,
    voice: dict[str, Any] | None = None,
    chats: list[Any] | None = None,
    **channel: Any,
) -> AsyncIterator[Any]:
    driver = SatoriDriver(fake, **channel)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'satori.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False},
            "channels": {"satori": driver.channel_settings()},
            "voice": voice or {},
            "chats": chats or [],
        },
        base_dir=tmp_path,
    )
    the_bot = Bot(
        config,
        registry=contract_registry(),
        model=HeldModel(_echo, asyncio.Event()),
        load_plugins=False,
    )
    try:
        await driver.attach(the_bot.channel_host, config.channels.satori)  # type: ignore[attr-defined]
        await the_bot.start()
        yield driver
    finally:
        await driver.detach()
        await the_bot.aclose()


def said(fake: FakeSatori, platform: str, channel: str) -> list[str]:
    return [read(m["content"])["text"] for m in fake.sent.get((platform, channel), [])]


async def test_events_missed_while_the_stream_was_down_come_after_identify_with_sn(
    tmp_path: Path,
) -> None:
    async with FakeSatori() as fake, running(fake, tmp_path):
        await fake.say("alpha", "private:7", "7", "/echo one", kind=DIRECT)
        await fake.wait_sent("alpha", "private:7", 1)
        await fake.drop_sockets()
        await fake.say("alpha", "private:7", "7", "/echo two", kind=DIRECT)  # nobody listening
        await fake.wait_sent("alpha", "private:7", 2)
        assert said(fake, "alpha", "private:7") == ["one", "two"]
        assert fake.identified[0].get("sn") is None and fake.identified[-1]["sn"] == 1


async def test_two_platforms_through_one_server_are_answered_as_their_own_login(
    tmp_path: Path,
) -> None:
    async with FakeSatori() as fake, running(fake, tmp_path) as driver:
        await fake.say("alpha", "private:7", "7", "/echo from alpha", kind=DIRECT)
        await fake.say("beta", "private:7", "7", "/echo from beta", kind=DIRECT)
        await fake.wait_sent("alpha", "private:7", 1)
        await fake.wait_sent("beta", "private:7", 1)
        assert said(fake, "alpha", "private:7") == ["from alpha"]
        assert said(fake, "beta", "private:7") == ["from beta"]
        assert set(driver.channel.logins) == {("alpha", "900"), ("beta", "901")}


async def test_platform_set_answers_only_that_platform(tmp_path: Path) -> None:
    async with FakeSatori() as fake, running(fake, tmp_path, platform="beta"):
        await fake.say("alpha", "private:7", "7", "/echo ignored", kind=DIRECT)
        await fake.say("beta", "private:7", "7", "/echo answered", kind=DIRECT)
        await fake.wait_sent("beta", "private:7", 1)
        assert said(fake, "beta", "private:7") == ["answered"]
        assert ("alpha", "private:7") not in fake.sent


def test_elements_escape_and_parse() -> None:
    assert escape('a & <b> "c"', attr=True) == "a &amp; &lt;b&gt; &quot;c&quot;"
    got = parse(
        '<quote id="q1"><author id="3"/>earlier &amp; more</quote><at id="900"/> 1 &lt; 2 '
        '<at id="5" name="Ann"/><img src="https://x.example/a.png"/>',
        "900",
    )
    assert (got.text, got.at_bot, got.quote_id, got.quoted) == (
        "1 < 2 @Ann",
        True,
        "q1",
        "earlier & more",
    )
    assert got.images == ["https://x.example/a.png"]
    assert parse('<audio src="https://x.example/v.ogg"/>', "900").audio == [
        "https://x.example/v.ogg"
    ]
    assert parse('<at id="5"/> hi', "900").at_bot is False
    out = to_satori('x < y & "z" **b** [l](https://e.example/?a=1&b=2)')
    assert out == 'x &lt; y &amp; "z" <b>b</b> <a href="https://e.example/?a=1&amp;b=2">l</a>'


def test_parts_stay_within_the_limit_as_sent() -> None:
    words = ["a&b<c>d"] * 150  # escaped, each word grows from 7 to 19 characters
    parts = render_parts(" ".join(words), 300)
    assert all(len(sent) <= 300 for _, sent in parts)
    assert " ".join(read(sent)["text"] for _, sent in parts).split() == words


def test_chat_ids_carry_the_login_and_keep_colons_of_the_channel() -> None:
    ref = parse_chat_id("private:chronocat:12345:private:678")
    assert (ref.group, ref.platform, ref.self_id, ref.channel) == (
        False,
        "chronocat",
        "12345",
        "private:678",
    )
    with pytest.raises(ValueError, match="not a Satori chat id"):
        parse_chat_id("private:678")


async def _create(fake: FakeSatori, headers: dict[str, str], body: Any) -> int:
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{fake.base}/v1/message.create", json=body, headers=headers) as r:
            return r.status


async def test_the_local_server_refuses_what_satori_refuses() -> None:
    async with FakeSatori() as fake:
        fake.channel("alpha", "g1", 0)
        ok = {
            "Authorization": f"Bearer {fake.token}",
            "Satori-Platform": "alpha",
            "Satori-User-ID": "900",
        }
        assert await _create(fake, ok, {"channel_id": "g1", "content": "hi &amp; bye"}) == 200
        assert (
            await _create(
                fake, {**ok, "Authorization": "Bearer no"}, {"channel_id": "g1", "content": "x"}
            )
            == 401
        )
        old = {k: v for k, v in ok.items() if k.startswith("Auth")} | {
            "X-Platform": "alpha",
            "X-Self-ID": "900",
        }
        assert await _create(fake, old, {"channel_id": "g1", "content": "x"}) == 403
        assert await _create(fake, ok, {"channel_id": "g1", "content": "a < b"}) == 400
        assert await _create(fake, ok, {"channel_id": "g1", "content": "x" * 2001}) == 400
        assert await _create(fake, ok, {"channel_id": "g1"}) == 400
        assert await _create(fake, ok, {"channel_id": "nope", "content": "x"}) == 404


async def test_check_online_lists_the_logins_and_names_a_refused_token() -> None:
    async with FakeSatori() as fake:
        good = SatoriSettings(endpoint=fake.base, token=SecretStr(fake.token))
        probes = await check(good, online=True)
        assert [p.status for p in probes] == ["ok", "ok"]
        assert "alpha:900" in probes[1].detail and "beta:901" in probes[1].detail
        bad = SatoriSettings(endpoint=fake.base, token=SecretStr("wrong"))
        probes = await check(bad, online=True)
        assert probes[1].status == "fail" and "channels.satori.token" in probes[1].detail
        other = SatoriSettings(endpoint=fake.base, token=SecretStr(fake.token), platform="gamma")
        probes = await check(other, online=True)
        assert probes[1].status == "fail" and "channels.satori.platform" in probes[1].detail
    assert (await check(SatoriSettings(), online=False))[0].status == "fail"
    with pytest.raises(ValueError, match="http"):
        SatoriSettings(endpoint="ftp://x")


async def test_a_silent_stream_is_pinged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chatfn.channels.satori import channel as module

    monkeypatch.setattr(module, "PING_EVERY", 0.05)
    async with FakeSatori() as fake, running(fake, tmp_path):
        await until(lambda: fake.pongs >= 2)


async def test_a_voice_message_is_transcribed(tmp_path: Path) -> None:
    """An `<audio>` element whose file is the server's own (its proxy route, downloaded with
    the token) goes to voice.stt and its transcript is answered."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    clip = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeSatori() as fake, AudioApi(transcripts=["你好啊"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, voice={"stt": stt}):
            src = fake.file(clip)
            await fake.say("alpha", "private:7", "7", f'<audio src="{src}"/>', kind=DIRECT)
            await fake.wait_sent("alpha", "private:7", 1)
    assert said(fake, "alpha", "private:7") == ["echo: 你好啊"]
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_as_an_audio_element(tmp_path: Path) -> None:
    """`/tts on`: after the text, a message with an `<audio>` element (its src a data URI of
    the spoken reply, well-formed element text as the fake requires); it decodes."""
    import base64

    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeSatori() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        async with running(fake, tmp_path, voice={"tts": tts}, chats=[{"voice": {"tts": "on"}}]):
            await fake.say("alpha", "private:8", "8", "say it", kind=DIRECT)
            text, voice = await fake.wait_sent("alpha", "private:8", 2)
    assert read(text["content"])["text"] == "echo: say it"
    [src] = parse(voice["content"], "900").audio
    assert src.startswith("data:audio/")
    fmt, seconds = probe(base64.b64decode(src.partition(",")[2]))
    assert "ogg" in fmt and seconds > 0.5
