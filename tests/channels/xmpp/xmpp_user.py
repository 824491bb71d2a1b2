"""A second XMPP client playing the user: slixmpp, logged in to the test Prosody, recording
every message stanza it receives."""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass
from typing import Any

import slixmpp

from tests.channels.xmpp.prosody_server import Prosody


@dataclass(frozen=True, slots=True)
class Got:
    sender: str  # full JID: user@host/resource or room@muc/nick
    kind: str  # chat, groupchat
    body: str
    origin_id: str
    delayed: bool
    oob: str = ""  # an XEP-0066 link


class XmppUser:
    def __init__(self, server: Prosody, user: str, nick: str = "") -> None:
        self.server = server
        self.jid = server.account(user)
        self.nick = nick or user
        self.got: list[Got] = []
        self.client = slixmpp.ClientXMPP(f"{self.jid}/test", server.accounts[self.jid])
        for plugin in ("xep_0030", "xep_0045", "xep_0066", "xep_0203", "xep_0359", "xep_0363"):
            self.client.register_plugin(plugin)
        self.client.enable_starttls = False
        self.client.enable_direct_tls = False
        self.client.enable_plaintext = True
        self.client.plugin["feature_mechanisms"].unencrypted_plain = True
        self.client.add_event_handler("message", self._message)

    def _message(self, msg: Any) -> None:
        if msg["type"] not in ("chat", "groupchat", "normal") or not msg["body"]:
            return
        origin = msg.xml.find("{urn:xmpp:sid:0}origin-id")
        oob = msg.xml.find("{jabber:x:oob}x/{jabber:x:oob}url")
        self.got.append(
            Got(
                str(msg["from"]),
                str(msg["type"]),
                str(msg["body"]),
                "" if origin is None else str(origin.get("id") or ""),
                msg.xml.find("{urn:xmpp:delay}delay") is not None,
                "" if oob is None else str(oob.text or ""),
            )
        )

    async def connect(self) -> XmppUser:
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def start(_event: Any) -> None:
            if not started.done():
                started.set_result(None)

        self.client.add_event_handler("session_start", start)
        self.client.connect("127.0.0.1", self.server.port)
        await asyncio.wait_for(started, 15)
        self.client.send_presence()
        return self

    async def join(self, room: str) -> None:
        await self.client.plugin["xep_0045"].join_muc_wait(
            slixmpp.JID(room), self.nick, maxstanzas=0, timeout=15
        )

    def say(self, to: str, body: str, *, group: bool = False) -> None:
        self.client.send_message(
            mto=slixmpp.JID(to), mbody=body, mtype="groupchat" if group else "chat"
        )

    async def upload(self, data: bytes, name: str, content_type: str) -> str:
        """`data` on the server's HTTP upload (XEP-0363), as Conversations puts a recording:
        its URL."""
        return str(
            await self.client.plugin["xep_0363"].upload_file(
                name, size=len(data), content_type=content_type, input_file=io.BytesIO(data)
            )
        )

    def send_file(self, to: str, url: str, *, oob: bool = True) -> None:
        """A file message as Conversations sends one: the URL as the body and, unless `oob`
        is false (an OMEMO file's aesgcm link), the same URL as an XEP-0066 link."""
        msg = self.client.make_message(mto=slixmpp.JID(to), mbody=url, mtype="chat")
        if oob:
            msg["oob"]["url"] = url
        msg.send()

    async def set_affiliation(self, room: str, jid: str, affiliation: str) -> None:
        await self.client.plugin["xep_0045"].set_affiliation(
            slixmpp.JID(room),
            affiliation,  # type: ignore[arg-type]
            jid=slixmpp.JID(jid),
        )

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.disconnect(wait=0.5), 3)
        with contextlib.suppress(Exception):
            self.client.abort()
