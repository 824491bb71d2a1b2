"""The XMPP channel's own cases against a real Prosody (prosody_server.py) and slixmpp users
(xmpp_user.py): XEP-0359 stanza ids for handling a message once, the room's history not
answered, the origin ids of what the bot sends, the `check` probe; settings and chat ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from chatfn.channels.xmpp import check
from chatfn.channels.xmpp.send import parse_chat_id, parts_of
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.common.messages import OutgoingMessage
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
        replies = await xmpp.sent(chat, 2)
        await asyncio.sleep(0.3)
        replies = xmpp.as_sent(chat)
    assert [r.text for r in replies] == ["echo: once", "echo: once"]
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
