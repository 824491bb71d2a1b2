"""The KOOK channel's own cases against the local KOOK (kook_fake.py): the gateway's
compression, HELLO, ping/pong, resume and RECONNECT as developer.kookapp.cn/doc/websocket
describes them, the rate-limit headers, what the fake (as KOOK) refuses, the `check` probe,
KMarkdown in and out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chatfn.channels import kit
from chatfn.channels.kook import check
from chatfn.channels.kook.api import KookApi, KookApiError
from chatfn.channels.kook.gateway import Gateway
from chatfn.channels.kook.parse import read_text
from chatfn.channels.kook.send import KookSender
from chatfn.channels.kook.settings import KookSettings
from chatfn.channels.markdown import to_kmarkdown
from chatfn.common.messages import OutgoingMessage
from tests.channels.contract import Chat, _echo
from tests.channels.kook.kook_driver import KookDriver, running
from tests.channels.kook.kook_fake import BOT_ID, TOKEN, FakeKook
from tests.kit import until


@pytest.fixture
async def fake() -> Any:
    async with FakeKook() as server:
        yield server


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's timings shortened: a ping every 0.2 s, a pong awaited 0.2 s."""
    monkeypatch.setattr(Gateway, "ping_interval", 0.2)
    monkeypatch.setattr(Gateway, "ping_jitter", 0.0)
    monkeypatch.setattr(Gateway, "pong_timeout", 0.2)
    monkeypatch.setattr(Gateway, "retry_pings", (0.1, 0.1))
    monkeypatch.setattr(Gateway, "hello_timeout", 0.5)


def settings(fake: FakeKook, **more: Any) -> KookSettings:
    return KookSettings.model_validate({"token": fake.token, "api_base": fake.api_base, **more})


# -- the gateway ---------------------------------------------------------------------------------
async def test_frames_are_zlib_compressed_and_read(fake: FakeKook, tmp_path: Path) -> None:
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2001")
        await driver.say(chat, "hello")
        [reply] = await driver.sent(chat, 1)
    assert reply.text == "echo: hello"
    assert fake.connects[0]["compress"] == "1" and fake.compressed_frames >= 2  # HELLO, event


async def test_uncompressed_frames_when_compress_is_off(fake: FakeKook, tmp_path: Path) -> None:
    driver = KookDriver(fake, compress=False)
    async with running(driver, tmp_path):
        chat = Chat("private", "2002")
        await driver.say(chat, "plain")
        [reply] = await driver.sent(chat, 1)
    assert reply.text == "echo: plain"
    assert fake.connects[0]["compress"] == "0" and fake.compressed_frames == 0


async def test_pings_carry_the_last_sn(fake: FakeKook, tmp_path: Path, quick: None) -> None:
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2003")
        await driver.say(chat, "one")
        await driver.sent(chat, 1)
        await fake.wait_for(lambda: fake.pings and fake.pings[-1] >= 1, 5)
    assert fake.pings == sorted(fake.pings)


async def test_a_missing_pong_resumes_the_session(
    fake: FakeKook, tmp_path: Path, quick: None
) -> None:
    """No PONG within its 6 s (here 0.2 s), nor after two more pings: the connection is given
    up and resumed with `resume=1`, the session id and the last `sn`; what was said meanwhile
    arrives once."""
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2004")
        await driver.say(chat, "before")
        await driver.sent(chat, 1)
        fake.pongs = False
        await fake.wait_for(lambda: len(fake.connects) >= 2, 10)
        fake.pongs = True
        resumed = fake.connects[1]
        assert resumed["resume"] == "1" and resumed["sn"] == "1"
        assert fake._session is not None and resumed["session_id"] == fake._session.id
        await driver.say(chat, "after")
        replies = await driver.sent(chat, 2, timeout=20)
    assert [r.text for r in replies] == ["echo: before", "echo: after"]
    assert len(fake.pings) >= 3


async def test_events_missed_while_away_are_replayed_once(fake: FakeKook, tmp_path: Path) -> None:
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        assert driver.channel is not None
        chat = Chat("private", "2005")
        await driver.say(chat, "first")
        await driver.sent(chat, 1)
        await fake.drop()
        await driver.say(chat, "while away")  # kept by the fake for the resume
        replies = await driver.sent(chat, 2, timeout=20)
        assert fake.resumed == 1
        assert driver.channel.gateway is not None and driver.channel.gateway.resumes == 1
    assert [r.text for r in replies] == ["echo: first", "echo: while away"]


async def test_reconnect_signal_starts_a_new_session(fake: FakeKook, tmp_path: Path) -> None:
    """s=5 RECONNECT: the sn and the session are dropped and the gateway is asked again (no
    resume parameters)."""
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2006")
        await driver.say(chat, "one")
        await driver.sent(chat, 1)
        await fake.reconnect(40107)
        await fake.wait_for(lambda: len(fake.connects) >= 2 and fake.connected, 15)
        assert "resume" not in fake.connects[1]
        assert fake.calls.count("GET gateway/index") == 2
        await driver.say(chat, "two")
        replies = await driver.sent(chat, 2, timeout=20)
    assert [r.text for r in replies] == ["echo: one", "echo: two"]


async def test_no_hello_within_its_deadline_connects_again(
    fake: FakeKook, tmp_path: Path, quick: None
) -> None:
    """HELLO must come within 6 s of connecting (here 0.5 s); else the connection is given
    up and the gateway tried again."""
    fake.hellos = False
    driver = KookDriver(fake)
    async with running(driver, tmp_path, ready=False):
        channel = driver.channel
        assert channel is not None
        await fake.wait_for(lambda: len(fake.connects) >= 2, 15)
        await until(lambda: "no HELLO" in channel.status, 5, lambda: channel.status)
        assert not channel.connected
        fake.hellos = True
        await until(lambda: channel.connected, 15, "connected once HELLO comes")


async def test_hello_40103_connects_again_from_the_gateway(fake: FakeKook, tmp_path: Path) -> None:
    """HELLO 40103 (token expired: "需要重新连接"): a new connection from the gateway."""
    fake.hello_code = 40103
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2007")
        await driver.say(chat, "after 40103")
        [reply] = await driver.sent(chat, 1)
    assert reply.text == "echo: after 40103"
    assert len(fake.connects) == 2 and fake.calls.count("GET gateway/index") == 2


async def test_a_refused_token_at_hello_is_refused_credentials(fake: FakeKook) -> None:
    """HELLO 40101 (invalid token) is the token refused, not a network failure."""
    cfg = settings(fake)
    async with aiohttp.ClientSession() as session:
        api = KookApi(cfg, session)

        class Channel:
            stopping = False

            def up(self) -> None: ...

            def down(self, why: Exception) -> None: ...

            async def failed(self, why: Exception, backoff: kit.Backoff) -> bool:
                return False

            async def pause(self, seconds: float) -> bool:
                return False

        gateway = Gateway(api, cfg, session, lambda d: None, Channel())
        gateway.url = f"ws://127.0.0.1:{fake.port}/gateway?compress=1&token=wrong"
        gateway.session_id = "gone"
        with pytest.raises(kit.CredentialsRefused, match="channels.kook.token"):
            await gateway.run()


def test_events_are_handled_in_sn_order_once() -> None:
    seen: list[int] = []
    gateway = Gateway.__new__(Gateway)
    gateway.sn, gateway.acked, gateway.buffer, gateway.pending = 0, 0, {}, {}
    gateway.keep, gateway.session_id = None, "s"

    def dispatch(d: dict[str, Any]) -> None:
        seen.append(d["n"])

    gateway.dispatch = dispatch
    for sn in (1, 3, 2, 2, 1, 5, 4):
        gateway._event({"s": 0, "sn": sn, "d": {"n": sn}})
    assert seen == [1, 2, 3, 4, 5] and gateway.sn == gateway.acked == 5 and not gateway.buffer


async def test_the_sn_told_to_kook_waits_for_the_store() -> None:
    """`acked` (pings, resumes) moves over an event only once its Taken settles (stored), in
    order; a released one (handling failed before the store) holds it and is taken again when
    KOOK sends it again; a confirmed one sent again is not."""
    takes: list[int] = []
    made: dict[int, kit.Taken] = {}
    kept: list[int] = []
    gateway = Gateway.__new__(Gateway)
    gateway.sn, gateway.acked, gateway.buffer, gateway.pending = 0, 0, {}, {}
    gateway.session_id = "s"
    gateway.keep = lambda session, sn: kept.append(sn)

    def dispatch(d: dict[str, Any]) -> kit.Taken:
        takes.append(d["n"])
        made[d["n"]] = kit.Taken(made.get(d["n"]))
        return made[d["n"]]

    gateway.dispatch = dispatch
    for sn in (1, 2, 3):
        gateway._event({"s": 0, "sn": sn, "d": {"n": sn}})
    assert gateway.acked == 0 and takes == [1, 2, 3]
    made[2].settle()
    await asyncio.sleep(0)  # done callbacks run on the loop
    assert gateway.acked == 0  # 1 is still in hand
    made[1].release()  # failed before the store
    made[3].settle()
    await asyncio.sleep(0)
    assert gateway.acked == 0
    for sn in (1, 2, 3):  # KOOK sends everything after the acked sn again
        gateway._event({"s": 0, "sn": sn, "d": {"n": sn}})
    assert takes == [1, 2, 3, 1]  # only the released one is taken again
    made[1].settle()
    await asyncio.sleep(0)
    assert gateway.acked == 3 and kept[-1] == 3


# -- the HTTP API ----------------------------------------------------------------------------------
async def test_429_and_an_empty_bucket_are_rate_limits(fake: FakeKook) -> None:
    import time

    cfg = settings(fake)
    body = {"type": 9, "target_id": "3001", "content": "hi"}
    async with aiohttp.ClientSession() as session:
        api = KookApi(cfg, session)
        fake.rate_limited["3001"] = time.monotonic() + 1.5
        with pytest.raises(KookApiError) as refused:
            await api.call("POST", "/v3/message/create", json=body)
        assert refused.value.status == 429 and refused.value.retry_after == 2.0
        # the bucket is empty (X-Rate-Limit-Remaining: 0): not called again before its reset
        calls = len(fake.calls)
        with pytest.raises(KookApiError) as waiting:
            await api.call("POST", "/v3/message/create", json=body)
        assert waiting.value.is_rate_limit and 0 < (waiting.value.retry_after or 0) <= 2.0
        assert len(fake.calls) == calls
        sender = KookSender(api, cfg)
        mapped = sender.classify(waiting.value, "group:3001")
        assert isinstance(mapped, kit.RateLimited) and mapped.retry_after is not None


async def test_the_fake_refuses_what_kook_refuses(fake: FakeKook) -> None:
    url = f"{fake.api_base}/v3/message/create"
    good = {"Authorization": f"Bot {TOKEN}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json={"type": 9, "target_id": "1", "content": "x"}) as r:
            assert r.status == 401 and (await r.json())["code"] == 401
        too_long = {"type": 9, "target_id": "1", "content": "x" * 8001}
        async with session.post(url, json=too_long, headers=good) as r:
            assert (await r.json())["code"] == 40000
        async with session.post(url, data=b"{not json", headers=good) as r:
            assert (await r.json())["code"] == 40000
        bad_quote = {"type": 9, "target_id": "1", "content": "x", "quote": "nope"}
        async with session.post(url, json=bad_quote, headers=good) as r:
            assert (await r.json())["code"] == 40000
        not_asset = {"type": 2, "target_id": "1", "content": "https://example.com/a.png"}
        async with session.post(url, json=not_asset, headers=good) as r:
            assert (await r.json())["code"] == 40000
    assert fake.posted == [] and len(fake.refused) == 4  # and the 401


async def test_a_refused_message_is_refused_for_good(fake: FakeKook) -> None:
    """KOOK's refusal of a message (here a quote of a message that does not exist) is
    DeliveryRefused: the outbox does not send it again."""
    cfg = settings(fake)
    async with aiohttp.ClientSession() as session:
        sender = KookSender(KookApi(cfg, session), cfg)
        out = OutgoingMessage(
            platform="kook", chat_id="group:3002", text="hi", reply_to="nope", quote=True
        )
        with pytest.raises(kit.DeliveryRefused, match="quote nope"):
            await sender.deliver(out)


# -- check ----------------------------------------------------------------------------------------
async def test_check_probe(fake: FakeKook) -> None:
    [offline] = await check(KookSettings(), online=False)
    assert offline.status == "fail" and "channels.kook.token" in offline.detail
    ok = await check(settings(fake), online=True)
    assert [p.status for p in ok] == ["ok", "ok"] and BOT_ID in ok[1].detail
    refused = await check(settings(fake, token="wrong"), online=True)
    assert refused[1].status == "fail" and "refused channels.kook.token" in refused[1].detail


def test_settings_name_their_key() -> None:
    with pytest.raises(ValueError, match="api_base"):
        KookSettings.model_validate({"token": "t", "api_base": "ftp://x"})
    assert KookSettings().api_base == "https://www.kookapp.cn/api"


# -- KMarkdown ----------------------------------------------------------------------------------
def test_kmarkdown_out_escapes_kooks_own_tags() -> None:
    assert to_kmarkdown("ping (met)all(met) now") == r"ping \(met\)all\(met\) now"
    assert to_kmarkdown("**b** _i_ ~~s~~ `c`") == "**b** *i* ~~s~~ `c`"
    assert to_kmarkdown("[x](https://a.b/c_(d))") == "[x](https://a.b/c_%28d%29)"
    assert to_kmarkdown("---") == "---" and to_kmarkdown("a\n\n---\n\nb") == "a\n\n---\n\nb"


def test_kmarkdown_in_reads_mentions() -> None:
    extra = {
        "mention": [BOT_ID, "42"],
        "kmarkdown": {
            "mention_part": [{"id": "42", "username": "Ann"}],
            "mention_role_part": [{"role_id": 7, "name": "mods"}],
        },
    }
    text, mentioned = read_text(
        f"(met){BOT_ID}(met) hi (met)42(met) and (rol)7(rol) \\*x\\*", 9, extra, BOT_ID
    )
    assert mentioned and text == "hi @Ann and @mods *x*"
    assert read_text("no mention", 1, {}, BOT_ID) == ("no mention", False)


async def test_a_group_mention_and_quote_go_out_as_kmarkdown(
    fake: FakeKook, tmp_path: Path
) -> None:
    driver = KookDriver(fake)
    async with running(
        driver, tmp_path, bot={"reply_with_mention": True, "reply_with_quote": True}
    ):
        group = Chat("group", "3003")
        said = await driver.say(group, "hi", sender="1002", mention=True)
        await driver.sent(group, 1)
    [post] = fake.sent_to("group", "3003")
    assert post.body["type"] == 9 and post.body["quote"] == said
    assert post.content.startswith("(met)1002(met) ") and post.body["nonce"].startswith("chatfn-")
    body = json.dumps(post.body)
    assert "temp_target_id" not in body


# -- confirmed once stored -------------------------------------------------------------------------
async def test_a_message_read_but_not_stored_when_the_bot_stops_comes_again(
    fake: FakeKook, tmp_path: Path
) -> None:
    """The first message holds its chat's turn; the second is read but waits, not stored,
    when the bot stops. The session and the sn up to which everything was stored are kept
    (state_path): the next start resumes the session there and KOOK sends the second again."""
    from tests.channels.held_model import HeldModel

    driver = KookDriver(fake)
    chat = Chat("private", "2101")
    model = HeldModel(_echo, asyncio.Event())
    async with running(driver, tmp_path, model=model) as bot:
        await driver.say(chat, "hold on")
        await until(lambda: stored_texts(bot, "private:2101", ["hold on"]), 10, "stored")
        await driver.say(chat, "queued behind it")
        gateway = driver.channel.gateway if driver.channel is not None else None
        assert gateway is not None
        await until(lambda: gateway.sn == 2 and gateway.acked == 1, 10, "read, one stored")
    kept = json.loads((tmp_path / "data" / "kook" / f"{BOT_ID}.json").read_text())
    assert kept["sn"] == 1 and fake._session is not None and kept["session_id"] == fake._session.id
    async with running(driver, tmp_path) as bot:
        [reply] = await driver.sent(chat, 1)
        assert await stored_texts(bot, "private:2101", ["hold on", "queued behind it"])
    assert reply.text == "echo: queued behind it"
    resumed = fake.connects[-1]
    assert resumed["resume"] == "1" and resumed["sn"] == "1" and fake.resumed == 1


async def test_a_message_whose_handling_failed_before_the_store_is_taken_again(
    fake: FakeKook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick: None
) -> None:
    """`host.handle` raising before the store: its sn is not confirmed, so KOOK sends it again
    after the next ping, and it is taken again (after RETAKE_AFTER) and answered once."""
    from chatfn.channels import intake
    from tests.channels.held_model import broker_away

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.3)
    driver = KookDriver(fake)
    chat = Chat("private", "2102")
    async with running(driver, tmp_path) as bot:
        tries = broker_away(bot, monkeypatch, {"once": 1})
        await driver.say(chat, "once")
        [reply] = await driver.sent(chat, 1, timeout=20)
        gateway = driver.channel.gateway if driver.channel is not None else None
        assert gateway is not None
        await until(lambda: gateway.acked == 1, 10, "confirmed once stored")
    assert reply.text == "echo: once" and tries == ["once", "once"] and fake.resent >= 1


async def stored_texts(bot: Any, chat_id: str, texts: list[str]) -> bool:
    from sqlalchemy import select

    from chatfn.storage.models import messages_table as m

    query = select(m.c.text).where(m.c.chat_id == chat_id, m.c.role == "user").order_by(m.c.id)

    def read() -> list[str]:
        with bot.storage.engine.connect() as conn:
            return [r.text for r in conn.execute(query)]

    return bool(await bot.storage.run(read) == texts)


async def test_a_send_cut_or_answered_5xx_is_sent_again(fake: FakeKook, tmp_path: Path) -> None:
    """A create whose connection is cut without an answer, then one answered 502: the reply
    waits in the outbox (Unreachable) and goes out once KOOK answers again, once."""
    fake.drop_next("/direct-message/create")
    fake.refuse_next("/direct-message/create", 502, body={"code": 502, "message": "bad gateway"})
    driver = KookDriver(fake)
    async with running(driver, tmp_path):
        chat = Chat("private", "2201")
        await driver.say(chat, "through")
        [reply] = await driver.sent(chat, 1, timeout=30)
    assert reply.text == "echo: through" and fake.scripted_answers == 2
    assert len(fake.sent_to("private", "2201")) == 1


async def test_a_voice_message_is_transcribed(tmp_path: Path) -> None:
    """A KOOK audio message (type 8: its file's URL on the asset CDN, fetched within the same
    bounds as images) goes to voice.stt and its transcript is answered."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    voice = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeKook() as fake, AudioApi(transcripts=["开黑吗"]) as api:
        driver = KookDriver(fake)
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(driver, tmp_path, voice={"stt": stt}):
            chat = Chat("private", "2008")
            await fake.say("private", "2008", "2008", fake.asset(voice, "ogg"), msg_type=8)
            [sent] = await driver.sent(chat, 1)
    assert sent.text == "echo: 开黑吗"
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_goes_as_an_audio_message(tmp_path: Path) -> None:
    """`/tts on`: after the text, the voice is uploaded as an asset and sent as an audio
    message (type 8, its asset URL); the fake refuses type 8 with anything but an uploaded
    audio asset. The asset decodes as audio."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeKook() as fake, AudioApi() as api:
        driver = KookDriver(fake)
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(driver, tmp_path, **config):
            await fake.say("private", "2009", "2009", "say it")
            await until(lambda: len(fake.sent_to("private", "2009")) >= 2, 15)
    text, voice = fake.sent_to("private", "2009")
    assert text.body.get("type") == 9 and voice.body.get("type") == 8
    assert voice.image is not None
    fmt, seconds = probe(voice.image)
    assert "ogg" in fmt and seconds > 0.5
