"""The WeChat channel's own cases against the local iLink (weixin_fake.py): the QR login end
to end through `chatfn login weixin`, an expired login (one line, a ✗ in `chatfn check
--online`), the context_token every reply must carry, the cursor kept only once messages are
stored, and what the fake refuses as iLink does."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from loguru import logger

from chatfn.channels.weixin.api import IlinkApi, IlinkError
from chatfn.channels.weixin.login import LoginFailed, qr_login
from chatfn.channels.weixin.settings import WeixinSettings
from chatfn.storage import channel_state
from tests.channels.conftest import LOCAL_MEDIA
from tests.channels.contract import PNG
from tests.channels.weixin.weixin_driver import WeixinDriver, running, user
from tests.channels.weixin.weixin_fake import BOT_ID, MAX_TEXT, SCANNER, FakeIlink
from tests.kit import until

pytestmark = pytest.mark.asyncio


def write_config(tmp_path: Path, fake: FakeIlink, **weixin: Any) -> Path:
    config = {
        "storage": {"url": f"sqlite:///{tmp_path / 'weixin.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "contractbot"},
        "channels": {
            "weixin": {"base_url": fake.api_base, "cdn_base_url": fake.cdn_base, **weixin}
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def scan_and_confirm(fake: FakeIlink, codes: int = 1) -> None:
    """The phone: scan (seen by the login's poll), then confirm."""
    code = await fake.wait_for(lambda: len(fake.codes) >= codes and fake.newest_code())
    await fake.scan(code.code)
    await fake.wait_for(lambda: "scaned" in fake.answered)
    await fake.confirm(code.code)


# -- the QR login ---------------------------------------------------------------------------
async def test_chatfn_login_weixin_shows_the_qr_code_and_keeps_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`chatfn login weixin` against the local iLink: the QR code is printed (text), the
    phone's scan and confirmation are the fake's; the token lands in the database, and a
    bot with no token in its config connects with it and answers."""
    from chatfn.cli import main

    async with FakeIlink() as fake:
        config = write_config(tmp_path, fake)
        login = asyncio.create_task(
            asyncio.to_thread(main, ["login", "weixin", "--config", str(config)])
        )
        await scan_and_confirm(fake)
        assert await asyncio.wait_for(login, 30) == 0
        out = capsys.readouterr().out
        content = f"https://liteapp.weixin.qq.com/q/{fake.newest_code().code}"
        assert "Scan this QR code" in out and content in out
        assert out.count("\n") > 15 and ("█" in out or "▀" in out or "▄" in out)  # drawn
        assert "scanned: confirm the login in WeChat" in out

        kept = await asyncio.to_thread(_kept, tmp_path / "weixin.db")
        assert kept["token"] == fake.token and kept["bot_id"] == BOT_ID
        assert kept["user_id"] == SCANNER and kept["base_url"] == fake.base

        driver = WeixinDriver(fake)
        driver.settings = {"token": ""}  # no token in the config: the stored login
        async with running(driver, tmp_path):
            await fake.say(user("1001"), "hello")
            [reply] = await fake.wait_for(lambda: fake.sent_to("private:1001@im.wechat"))
            assert reply.text == "echo: hello"


async def test_an_expired_qr_code_is_replaced_and_the_third_gives_up(tmp_path: Path) -> None:
    async with FakeIlink(hold=0.5) as fake:
        settings = WeixinSettings(base_url=fake.api_base)
        shown: list[tuple[str, str]] = []

        async def expire_all() -> None:
            for n in range(1, 4):
                code = await fake.wait_for(lambda n=n: len(fake.codes) >= n and fake.newest_code())
                await fake.expire(code.code)

        expiring = asyncio.create_task(expire_all())
        with pytest.raises(LoginFailed, match="expired 3 times"):
            await qr_login(settings, lambda kind, text: shown.append((kind, text)), pause=0.01)
        await expiring
        assert [k for k, _ in shown].count("qr") == 3 and fake.qr_requests == 3


async def test_a_login_without_the_phone_times_out(tmp_path: Path) -> None:
    async with FakeIlink(hold=0.1) as fake:
        settings = WeixinSettings(base_url=fake.api_base, login_timeout=0.5)
        with pytest.raises(TimeoutError):
            await qr_login(settings, lambda kind, text: None, pause=0.01)


# -- an expired login -----------------------------------------------------------------------
async def test_an_expired_token_is_one_line_and_a_fail_in_chatfn_check(tmp_path: Path) -> None:
    from chatfn.check import run_checks

    async with FakeIlink() as fake:
        config = write_config(tmp_path, fake, token=fake.token)
        report = await asyncio.to_thread(run_checks, str(config), True, False, None, ["weixin"])
        [probe] = [c for c in report.checks if c.name == "channel weixin getconfig"]
        assert probe.status == "ok", report.table()

        fake.revoked.add(fake.token)
        report = await asyncio.to_thread(run_checks, str(config), True, False, None, ["weixin"])
        [probe] = [c for c in report.checks if c.name == "channel weixin getconfig"]
        assert probe.status == "fail" and "expired" in probe.detail
        assert "chatfn login weixin" in probe.detail and "✗" in report.table()
        fake.revoked.clear()

        lines: list[str] = []
        sink = logger.add(lambda m: lines.append(m.record["message"]), level="ERROR")
        driver = WeixinDriver(fake)
        try:
            async with running(driver, tmp_path):
                channel: Any = driver.channel
                fake.revoked.add(fake.token)
                await fake.drop()
                await until(lambda: channel.refusals >= 1, 15, "the refusal")
                assert not channel.connected and "expired" in channel.status
        finally:
            logger.remove(sink)
        said = [line for line in lines if "expired" in line]
        assert len(said) == 1 and "chatfn login weixin" in said[0], lines


async def test_check_uses_the_stored_login_and_says_when_there_is_none(tmp_path: Path) -> None:
    from chatfn.channels.weixin.state import Login
    from chatfn.check import run_checks

    async with FakeIlink() as fake:
        config = write_config(tmp_path, fake)
        report = await asyncio.to_thread(run_checks, str(config), True, False, None, ["weixin"])
        [line] = [c for c in report.checks if c.name == "channel weixin"]
        assert line.status == "fail" and "chatfn login weixin" in line.detail

        kept = Login(token=fake.token, base_url=fake.base, bot_id=BOT_ID).dumps()
        await asyncio.to_thread(_keep, tmp_path / "weixin.db", kept)
        report = await asyncio.to_thread(run_checks, str(config), True, False, None, ["weixin"])
        [probe] = [c for c in report.checks if c.name == "channel weixin getconfig"]
        assert probe.status == "ok", report.table()


def _keep(path: Path, kept: str) -> None:
    from chatfn.storage.db import Storage

    storage = Storage(f"sqlite:///{path}")
    try:
        storage.migrate()
        channel_state.save(storage.engine, "weixin", "login", kept)
    finally:
        storage.close()


def _kept(path: Path) -> dict[str, Any]:
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{path}")
    try:
        return dict(json.loads(channel_state.load(engine, "weixin", "login") or "{}"))
    finally:
        engine.dispose()


# -- context tokens, the cursor -------------------------------------------------------------
async def test_a_chat_the_user_never_wrote_in_is_refused_not_retried(tmp_path: Path) -> None:
    from chatfn.common.messages import DeliveryRefused, OutgoingMessage

    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path):
            channel: Any = driver.channel
            out = OutgoingMessage(platform="weixin", chat_id="private:9@im.wechat", text="hi")
            with pytest.raises(DeliveryRefused, match="context_token"):
                await channel.send(out)
            assert fake.posted == []


async def test_a_stale_context_token_is_refused_by_ilink_and_not_retried(tmp_path: Path) -> None:
    from chatfn.common.messages import DeliveryRefused, OutgoingMessage

    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path):
            await fake.say(user("1001"), "hello")
            await fake.wait_for(lambda: fake.sent_to("private:1001@im.wechat"))
            fake.stale("private:1001@im.wechat")
            channel: Any = driver.channel
            out = OutgoingMessage(platform="weixin", chat_id="private:1001@im.wechat", text="x")
            with pytest.raises(DeliveryRefused, match="invalid context_token"):
                await channel.send(out)
            assert len(fake.posted) == 1


async def test_the_context_token_survives_a_restart(tmp_path: Path) -> None:
    """A reminder after a restart: the chat's newest token comes from the database."""
    from chatfn.common.messages import OutgoingMessage

    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path):
            await fake.say(user("1001"), "hello")
            await fake.wait_for(lambda: fake.sent_to("private:1001@im.wechat"))
        async with running(driver, tmp_path):
            channel: Any = driver.channel
            out = OutgoingMessage(platform="weixin", chat_id="private:1001@im.wechat", text="later")
            await channel.send(out)
            assert [p.text for p in fake.sent_to("private:1001@im.wechat")][-1] == "later"
        # Each run told iLink it started and stopped; the private message showed "typing".
        assert fake.notified == ["start", "stop", "start", "stop"]
        assert [t["status"] for t in fake.typing] == [1]
        assert fake.typing[0]["ilink_user_id"] == "1001@im.wechat"


async def test_the_cursor_is_kept_once_stored_and_a_redelivery_is_not_answered_twice(
    tmp_path: Path,
) -> None:
    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path) as bot:
            await fake.say(user("1001"), "one")
            await fake.wait_for(lambda: fake.sent_to("private:1001@im.wechat"))
            storage = bot.storage

            async def kept() -> str | None:
                keys = ("cursor:",)
                rows = await storage.run(_cursors, storage.engine)
                return next((v for k, v in rows if k.startswith(keys)), None)

            cursor = None

            async def written() -> bool:
                nonlocal cursor
                cursor = await kept()
                return cursor is not None

            await until(written, 10, "the poll's cursor was not kept")
            assert json.loads(base64.b64decode(cursor))["pos"] == 1
            # A crash before the cursor was written: iLink is asked from the start again.
            await storage.run(_rewind_cursors, storage.engine)
        await fake.say(user("1001"), "two")
        async with running(driver, tmp_path):
            await fake.wait_for(lambda: len(fake.sent_to("private:1001@im.wechat")) >= 2)
            await until(
                lambda: fake.recorded.count(("POST", "/ilink/bot/getupdates")) >= 4, 10, "polls"
            )
        texts = [p.text for p in fake.sent_to("private:1001@im.wechat")]
        assert texts == ["echo: one", "echo: two"]


def _cursors(engine: Any) -> list[tuple[str, str]]:
    from sqlalchemy import select

    from chatfn.storage.models import channel_state_table as t

    with engine.connect() as conn:
        return [(r.key, r.value) for r in conn.execute(select(t.c.key, t.c.value))]


def _rewind_cursors(engine: Any) -> None:
    from sqlalchemy import update

    from chatfn.storage.models import channel_state_table as t

    with engine.begin() as conn:
        conn.execute(update(t).where(t.c.key.like("cursor:%")).values(value=""))


# -- what the fake refuses, as iLink does -----------------------------------------------------
async def test_the_fake_refuses_a_bad_token_missing_headers_and_over_long_text() -> None:
    async with FakeIlink() as fake, aiohttp.ClientSession() as session:
        with pytest.raises(IlinkError) as refused:
            await IlinkApi(session, fake.base, "not-the-token").post(
                "getupdates", {"get_updates_buf": ""}
            )
        assert refused.value.expired
        body = json.dumps({"get_updates_buf": "", "base_info": {}})
        async with session.post(f"{fake.base}/ilink/bot/getupdates", data=body) as got:
            assert (await got.json())["ret"] == -1  # no AuthorizationType, no X-WECHAT-UIN
        await fake.say(user("1001"), "hi")
        token = next(iter(fake.contexts["private:1001@im.wechat"]))
        api = IlinkApi(session, fake.base, fake.token)

        def message(text: str) -> dict[str, Any]:
            item = {"type": 1, "text_item": {"text": text}}
            return {
                "msg": {
                    "to_user_id": "1001@im.wechat",
                    "context_token": token,
                    "message_type": 2,
                    "message_state": 2,
                    "item_list": [item],
                }
            }

        with pytest.raises(IlinkError, match="characters"):
            await api.post("sendmessage", message("x" * (MAX_TEXT + 1)))
        await api.post("sendmessage", message("x" * MAX_TEXT))
        with pytest.raises(IlinkError, match="context_token"):
            await api.post("sendmessage", {"msg": {**message("y")["msg"], "context_token": "nope"}})


async def test_a_long_reply_is_split_within_the_limit_ilink_takes(tmp_path: Path) -> None:
    """max_message_length above what the fake takes would be refused: the default stays
    under it, and every part is within it."""
    async with FakeIlink(max_text=2000) as fake:
        driver = WeixinDriver(fake)
        driver.max_length = 2000
        async with running(driver, tmp_path):
            await fake.say(user("1001"), "/essay")
            await fake.wait_for(lambda: any("The end." in p.text for p in fake.posted))
        assert len(fake.posted) >= 2 and all(len(p.text) <= 2000 for p in fake.posted)


async def test_images_go_through_the_cdn_encrypted(tmp_path: Path) -> None:
    """An image out is encrypted with a new key the fake decrypts with its own code; an
    image in is decrypted to what the user sent."""
    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path) as bot:
            await fake.say(user("1001"), "/picture")
            [image] = await fake.wait_for(
                lambda: [p for p in fake.sent_to("private:1001@im.wechat") if p.image]
            )
            assert image.image == PNG
            assert PNG not in b"".join(fake.cdn.values())  # only ciphertext on the CDN
            said = await fake.say(user("1002"), "look", image=PNG)
            await fake.wait_for(lambda: fake.sent_to("private:1002@im.wechat"))
            from sqlalchemy import select

            from chatfn.storage.models import messages_table as m

            def row() -> Any:
                with bot.storage.engine.connect() as conn:
                    return conn.execute(select(m.c.text).where(m.c.message_id == said)).first()

            assert "[image: " in (await bot.storage.run(row)).text


class _FailOnce:
    """The bot's ChannelHost, whose first handling of a message saying `boom` fails before
    the message is stored (a broker away, a bug)."""

    def __init__(self, host: Any) -> None:
        self._host = host
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    async def handle(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        if msg.text == "boom" and not self.failed:
            self.failed += 1
            raise RuntimeError("not stored")
        return await self._host.handle(msg, *args, **kwargs)


async def test_a_message_not_stored_rewinds_the_poll_and_is_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cursor is not kept past a message that was read but not stored: the poll goes
    back to the kept cursor and iLink's redelivery is taken again (once answered)."""
    from chatfn.channels import intake
    from chatfn.channels.weixin import channel as weixin_channel

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.2)
    monkeypatch.setattr(weixin_channel, "RETAKE_AFTER", 0.2)
    async with FakeIlink(hold=0.3) as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path) as bot:
            channel: Any = driver.channel
            proxy = _FailOnce(channel.host)
            channel.host = proxy
            await fake.say(user("1001"), "boom")
            await fake.wait_for(lambda: fake.sent_to("private:1001@im.wechat"), 20)
            assert proxy.failed == 1
            storage = bot.storage

            async def at_the_first() -> bool:
                rows = dict(await storage.run(_cursors, storage.engine))
                kept = next((v for k, v in rows.items() if k.startswith("cursor:")), "")
                return bool(kept) and json.loads(base64.b64decode(kept))["pos"] == 1

            await until(at_the_first, 10, "the cursor was not kept at the first message")
            await fake.say(user("1001"), "after")
            await fake.wait_for(lambda: len(fake.sent_to("private:1001@im.wechat")) >= 2)
        texts = [p.text for p in fake.sent_to("private:1001@im.wechat")]
        assert texts == ["echo: boom", "echo: after"]


async def test_an_image_full_url_on_another_host_is_not_fetched(tmp_path: Path) -> None:
    """A message's `full_url` naming a host other than the CDN's or iLink's is not fetched;
    the download parameter goes to the configured CDN instead."""
    async with FakeIlink() as fake:
        driver = WeixinDriver(fake)
        async with running(driver, tmp_path) as bot:
            said = await fake.say(
                user("1003"), "look", image=PNG, full_url=f"{fake.base}.elsewhere.invalid/x"
            )  # its text starts with iLink's address: the host is what counts
            await fake.wait_for(lambda: fake.sent_to("private:1003@im.wechat"))
            from sqlalchemy import select

            from chatfn.storage.models import messages_table as m

            def row() -> Any:
                with bot.storage.engine.connect() as conn:
                    return conn.execute(select(m.c.text).where(m.c.message_id == said)).first()

            assert "[image: " in (await bot.storage.run(row)).text
            assert ("GET", "/c2c/download") in fake.recorded


@pytest.mark.parametrize("ilink_heard", ["今天吃什么", ""])
async def test_a_voice_message_is_heard(tmp_path: Path, ilink_heard: str) -> None:
    """A voice item: iLink's own transcript (`voice_item.text`) is the message's text, no STT
    call; without one, its SILK (encrypted on the CDN) is decrypted and transcribed by
    voice.stt."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, silk

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(silk, 2.0)
    async with FakeIlink() as fake, AudioApi(transcripts=["明天见"]) as api:
        driver = WeixinDriver(fake)
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        config = {"voice": {"stt": stt}, "bot": LOCAL_MEDIA}
        async with running(driver, tmp_path, **config):
            await fake.say(user("1009"), voice=voice, voice_text=ilink_heard)
            [reply] = await fake.wait_for(lambda: fake.sent_to("private:1009@im.wechat"))
    assert reply.text == f"echo: {ilink_heard or '明天见'}"
    if ilink_heard:
        assert api.transcriptions == []
    else:
        [req] = api.transcriptions
        assert 1.9 < req.seconds < 2.1


@pytest.mark.parametrize("spoken", [2.0, 62.0])
async def test_a_spoken_reply_goes_to_wechat_as_a_silk_voice(tmp_path: Path, spoken: float) -> None:
    """`/tts on` in a WeChat chat: the reply's text, then its voice as openclaw-weixin sends
    one: SILK uploaded to the CDN as media_type 4 and a voice item (type 3, encode_type 6)
    with its length. The fake refuses any other form; the voice decodes to audio of the
    spoken length. WeChat's voices last at most 60 s: 62 s go as a 59 s and a 3 s voice."""
    from chatfn.common.audio import _silk_to_pcm
    from tests.fakes.audio_api import FFMPEG, AudioApi

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    lengths = [2.0] if spoken < 59 else [59.0, 3.0]
    chat = "private:1010@im.wechat"
    async with FakeIlink() as fake, AudioApi(speech_seconds=spoken) as api:
        driver = WeixinDriver(fake)
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}], "bot": LOCAL_MEDIA}
        async with running(driver, tmp_path, **config):
            await fake.say(user("1010"), "read this aloud")
            text, *voices = await fake.wait_for(
                lambda: len(got := fake.sent_to(chat)) >= 1 + len(lengths) and got, 60
            )
    assert text.text.endswith("read this aloud") and fake.bad_requests == []
    assert len(voices) == len(lengths)
    for voice, length in zip(voices, lengths, strict=True):
        assert voice.voice is not None
        pcm = _silk_to_pcm(voice.voice)  # SILK that decodes: 24 kHz 16-bit mono
        assert abs(len(pcm) / 2 / 24000 - length) < 0.2
        item = voice.body["item_list"][0]["voice_item"]
        assert item["sample_rate"] == 24000 and abs(item["playtime"] - length * 1000) < 100
        assert voice.body["context_token"] == text.body["context_token"]
    [speech] = api.speeches
    assert speech["input"].endswith("read this aloud")
