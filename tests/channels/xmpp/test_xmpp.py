"""The XMPP channel's own cases against a real Prosody (prosody_server.py) and slixmpp users
(xmpp_user.py): XEP-0359 stanza ids for handling a message once, the room's history not
answered, the origin ids of what the bot sends, the `check` probe; settings and chat ids."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from chatfn.channels.xmpp import check
from chatfn.channels.xmpp.channel import aesgcm_link, decrypt_aesgcm, voice_link
from chatfn.channels.xmpp.send import parse_chat_id, parts_of
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.common.messages import OutgoingMessage
from tests.channels.conftest import LOCAL_MEDIA
from tests.channels.contract import Chat
from tests.channels.xmpp.prosody_server import DOMAIN, Prosody
from tests.channels.xmpp.xmpp_driver import XmppDriver, room_of, running
from tests.kit import until


@pytest.mark.services
async def test_a_stanza_id_is_handled_once(xmpp: XmppDriver, tmp_path: Path) -> None:
    """The server stamps each message it archives with a stanza-id (XEP-0359, by the bot's
    JID); the same message given again (a redelivery) is not answered twice."""
    chat = Chat("private", "3001")
    async with running(xmpp, tmp_path):
        user = await xmpp.user("3001")
        user.say(f"bot@{DOMAIN}", "once")
        [reply] = await xmpp.sent(chat, 1)
        channel = xmpp.channel
        assert channel is not None and channel.client is not None
        again = channel.client.make_message(mto=f"bot@{DOMAIN}", mbody="once", mtype="chat")
        again["from"] = user.client.boundjid
        stanza = again.xml.makeelement(
            "{urn:xmpp:sid:0}stanza-id", {"id": "sid-1", "by": f"bot@{DOMAIN}"}
        )
        again.xml.append(stanza)
        channel._on_message(again)
        channel._on_message(again)
        await xmpp.sent(chat, 2)
        # A later message's answer comes after anything the repeat could still cause (one
        # chat's messages are handled in order): no fixed wait to see that nothing came.
        user.say(f"bot@{DOMAIN}", "after")
        await xmpp.sent(chat, 3)
        replies = xmpp.as_sent(chat)
    assert [r.text for r in replies] == ["echo: once", "echo: once", "echo: after"]
    assert reply.message_id and reply.message_id.startswith("chatfn-")  # the origin id


@pytest.mark.services
async def test_the_rooms_history_is_not_answered(xmpp: XmppDriver, tmp_path: Path) -> None:
    group = Chat("group", "x1")
    early = await xmpp.user("1001")
    early.say(room_of("x1"), "chatbot: said before the bot came", group=True)
    await asyncio.sleep(0.1)
    async with running(xmpp, tmp_path, bot={"reply_with_mention": False}):
        await xmpp.say(group, "now", mention=True)
        replies = await xmpp.sent(group, 1)
    assert [r.text for r in replies] == ["echo: now"]


@pytest.mark.services
async def test_check_online_logs_in(prosody: Prosody) -> None:
    jid = prosody.account("probe", "right")
    good = XmppSettings(jid=jid, password="right", server=f"127.0.0.1:{prosody.port}", tls=False)  # type: ignore[arg-type]
    [offline, online] = await check(good, True)
    assert offline.status == "ok" and online.status == "ok", online
    bad = XmppSettings.model_validate({**good.model_dump(), "password": "wrong"})
    [_, refused] = await check(bad, True)
    assert refused.status == "fail" and "channels.xmpp.password" in refused.detail, refused
    closed = XmppSettings.model_validate(
        {**good.model_dump(), "password": "right", "server": "127.0.0.1:1"}
    )
    closed = closed.model_copy(update={"connect_timeout": 5.0})
    [_, unreachable] = await check(closed, True)
    assert unreachable.status == "fail" and "not reachable" in unreachable.detail, unreachable


@pytest.mark.services
async def test_a_probe_closing_at_once_logs_no_error(
    prosody: Prosody, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe closes right after the login: what slixmpp's plugins still queue then (the
    capabilities query answering it) is dropped quietly, not logged as "Exception raised in
    send queue" with a traceback in `chatfn check --online` and the console (it was, in most
    of eight probes, before close() dropped it)."""
    jid = prosody.account("probes", "right")
    good = XmppSettings(jid=jid, password="right", server=f"127.0.0.1:{prosody.port}", tls=False)  # type: ignore[arg-type]
    caplog.set_level(logging.ERROR, logger="slixmpp")
    for _ in range(8):
        [_, online] = await check(good, True)
        assert online.status == "ok", online
    await asyncio.sleep(0.1)  # the last probe's send queue gets its turn
    assert [r.getMessage() for r in caplog.records if r.name.startswith("slixmpp")] == []


def test_settings_and_chat_ids() -> None:
    with pytest.raises(ValidationError, match="jid"):
        XmppSettings(jid="no-at-sign")
    with pytest.raises(ValidationError, match="rooms"):
        XmppSettings(jid="bot@example.org", rooms=["room-without-server"])
    assert "channels.xmpp.jid" in (XmppSettings().problem() or "")
    assert "channels.xmpp.password" in (XmppSettings(jid="b@example.org").problem() or "")
    assert XmppSettings(jid="b@x.org", server="xmpp.x.org").address() == ("xmpp.x.org", 5222)
    assert XmppSettings(jid="b@x.org").address() is None
    assert parse_chat_id("group:room@conference.x.org").is_group
    with pytest.raises(ValueError, match="expected group:room@server"):
        parse_chat_id("private:user@x.org/resource")
    ref = parse_chat_id("group:room@conference.x.org")
    out = OutgoingMessage(
        platform="xmpp",
        chat_id=ref.key,
        text="**hi** " + "word " * 50,
        at="room@conference.x.org/ann",
    )
    parts = parts_of(out, ref, 100)
    assert parts[0].startswith("ann: hi word") and all(len(p) <= 100 for p in parts)


@pytest.mark.services
async def test_an_image_goes_through_the_servers_http_upload(
    xmpp: XmppDriver, tmp_path: Path
) -> None:
    """XEP-0363: the image is put on Prosody's upload service (mod_http_file_share) and its
    URL sent as an XEP-0066 link; the URL serves the image."""
    import aiohttp

    from tests.channels.contract import PNG

    chat = Chat("private", "3003")
    async with running(xmpp, tmp_path):
        user = await xmpp.user("3003")
        user.say(f"bot@{DOMAIN}", "/picture")
        await until(lambda: any(s.images for s in xmpp.as_sent(chat)), 15, "the image")
    [url] = [i for s in xmpp.as_sent(chat) for i in s.images]
    assert isinstance(url, str) and url.startswith(f"http://127.0.0.1:{xmpp.server.http_port}/")
    async with aiohttp.ClientSession() as session, session.get(url) as got:
        assert got.status == 200 and await got.read() == PNG


# -- voice (issue 43) -------------------------------------------------------------------------
def test_a_voice_link_is_a_link_to_an_audio_file() -> None:
    """What Conversations sends for a recording (the upload's URL as body and as XEP-0066
    link, or an OMEMO file's aesgcm link) is a voice; text, pages and images are not."""
    url = "https://upload.example.org/abc/2026-11-28_voice.m4a"
    assert voice_link(url, url) == url
    assert voice_link("", url) == url
    assert voice_link(url, "") == url
    gcm = "aesgcm://upload.example.org/x/rec.oga#" + "ab" * 44
    assert voice_link(gcm, "") == gcm
    assert voice_link("listen: " + url, "") is None  # a sentence with a link is text
    assert voice_link("https://example.org/page", "") is None
    assert voice_link("https://example.org/a.png", "https://example.org/a.png") is None
    assert voice_link("ftp://example.org/a.mp3", "") is None
    assert voice_link("caption", url) is None  # a body of its own: the text is the message


def test_an_aesgcm_file_is_decrypted_with_its_links_key() -> None:
    """XEP-0454: the fragment is the IV then the key in hex (12- or 16-byte IVs); the file is
    AES-256-GCM with the tag after it. A wrong key or a fragment of another size is refused."""
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    plain = b"OggS voice bytes" * 10
    for iv_size in (12, 16):
        iv, key = os.urandom(iv_size), AESGCM.generate_key(256)
        link = f"aesgcm://host.example/f/v.ogg#{iv.hex()}{key.hex()}"
        found = aesgcm_link(link)
        assert found == ("https://host.example/f/v.ogg", iv, key)
        assert decrypt_aesgcm(AESGCM(key).encrypt(iv, plain, None), iv, key) == plain
        with pytest.raises(ValueError, match="does not decrypt"):
            decrypt_aesgcm(AESGCM(key).encrypt(iv, plain, None), iv, os.urandom(32))
    assert aesgcm_link("aesgcm://host.example/v.ogg#abcd") is None
    assert aesgcm_link("aesgcm://host.example/v.ogg") is None


@pytest.mark.services
async def test_a_voice_message_from_conversations_is_heard(
    xmpp: XmppDriver, tmp_path: Path
) -> None:
    """A recording sent as Conversations sends it (put on Prosody's HTTP upload, then its URL
    as body and XEP-0066 link) is downloaded within bot.fetch's bounds and transcribed by
    voice.stt: the reply answers the transcript, not the link."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    recording = await asyncio.to_thread(tone, 2.0, "m4a")
    chat = Chat("private", "3005")
    async with AudioApi(transcripts=["what is the time"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(xmpp, tmp_path, voice={"stt": stt}, bot=LOCAL_MEDIA):
            user = await xmpp.user("3005")
            url = await user.upload(recording, "2026-11-28_voice.m4a", "audio/mp4")
            user.send_file(f"bot@{DOMAIN}", url)
            [reply] = await xmpp.sent(chat, 1)
    assert reply.text == "echo: what is the time"
    [heard] = api.transcriptions
    assert heard.format == "wav" and 1.9 < heard.seconds < 2.1


@pytest.mark.services
async def test_a_spoken_reply_goes_as_an_ogg_opus_file_through_http_upload(
    xmpp: XmppDriver, tmp_path: Path
) -> None:
    """`/tts on`: the reply's text, then its voice put on Prosody's upload service
    (XEP-0363) as OGG/Opus and sent as an XEP-0066 link with the URL as the body; the URL
    serves audio/ogg that decodes to the spoken length."""
    import aiohttp

    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    chat = Chat("private", "3006")
    async with AudioApi(speech_seconds=2.0) as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(xmpp, tmp_path, **config):
            user = await xmpp.user("3006")
            user.say(f"bot@{DOMAIN}", "read this aloud")
            await until(lambda: len(xmpp.received(chat)) >= 2, 20, "the text and the voice")
    text, voice = xmpp.received(chat)
    assert text.body.endswith("read this aloud") and not text.oob
    assert voice.oob and voice.body == voice.oob and voice.oob.endswith(".ogg")
    assert voice.origin_id.endswith("-voice0")
    async with aiohttp.ClientSession() as session, session.get(voice.oob) as got:
        assert got.status == 200 and got.content_type == "audio/ogg"
        data = await got.read()
    kind, seconds = await asyncio.to_thread(probe, data)
    assert kind == "ogg" and 1.9 < seconds < 2.1
