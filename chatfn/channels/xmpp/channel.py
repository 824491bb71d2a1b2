"""The XMPP channel: a bot account on an XMPP server, in one-to-one chats and XEP-0045
multi-user chat rooms, through slixmpp (kept up, asyncio-native).

- connect: a new slixmpp client each time (STARTTLS unless `tls: false`), until the session
  starts; the server refusing the password is CredentialsRefused naming
  `channels.xmpp.password`;
- serve: presence, then each room of `rooms` joined as `nick` without its history; messages
  read until the stream ends, then reconnect with backoff and rejoin;
- in: `type="chat"` (or normal) messages are the chat `private:<bare JID>`, a room's
  `groupchat` messages `group:<room JID>` (the bot's own echo and the room's history, which
  carries a delay, skipped); `nick: ` / `nick, ` before a room message or the nick in it is a
  mention; each message's XEP-0359 `<stanza-id>` given by the server (or the room) is its id,
  so one the server gives again (after a reconnect) is handled once; a room's owners and
  admins (affiliation) and moderators (role) are its admins; an occupant who comes in after
  the bot is the member-joined event;
- out: send.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from typing import Any

import slixmpp

from chatfn.channels import kit
from chatfn.channels.xmpp.send import ChatRef, XmppSender
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["XmppChannel", "make_client"]

_PLUGINS = (
    "xep_0030",
    "xep_0045",
    "xep_0059",
    "xep_0066",
    "xep_0199",
    "xep_0203",
    "xep_0359",
    "xep_0363",
)
_ADMIN_AFFILIATIONS = {"owner": "owner", "admin": "admin"}


def make_client(jid: str, password: str, *, tls: bool) -> slixmpp.ClientXMPP:
    """A slixmpp client with the plugins the channel uses."""
    client = slixmpp.ClientXMPP(jid, password)
    for plugin in _PLUGINS:
        client.register_plugin(plugin)
    if not tls:  # a server on localhost: plain connection and PLAIN without TLS allowed
        client.enable_starttls = False
        client.enable_direct_tls = False
        client.enable_plaintext = True
        client.plugin["feature_mechanisms"].unencrypted_plain = True
    return client


async def session(client: slixmpp.ClientXMPP, address: tuple[str, int] | None) -> str:
    """Connect `client` until its session starts: "ok", "refused" or "unreachable: why"."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[str] = loop.create_future()

    def settle(value: str) -> None:
        if not outcome.done():
            outcome.set_result(value)

    client.add_event_handler("session_start", lambda _e: settle("ok"))
    client.add_event_handler("failed_all_auth", lambda _e: settle("refused"))
    client.add_event_handler("connection_failed", lambda e: settle(f"unreachable: {e}"))
    client.add_event_handler("disconnected", lambda e: settle(f"unreachable: {e or 'closed'}"))
    if address is None:
        client.connect()
    else:
        client.connect(*address)
    return await outcome


class XmppChannel(kit.PlatformChannel[XmppSettings], platform="xmpp", label="XMPP"):
    def __init__(self, host: ChannelHost, settings: XmppSettings) -> None:
        super().__init__(host, settings)
        self.client: slixmpp.ClientXMPP | None = None
        self.sender = XmppSender(self, settings, self.policy)
        self.nick = settings.room_nick()
        self.joined: set[str] = set()
        self._occupants: dict[str, set[str]] = {}
        self._gone: asyncio.Event = asyncio.Event()

    # -- connect ---------------------------------------------------------------------------
    async def connect(self) -> str:
        cfg = self.cfg
        client = make_client(cfg.jid, cfg.secret_text("password"), tls=cfg.tls)
        where = cfg.server or cfg.jid.split("@", 1)[1]
        try:
            async with asyncio.timeout(cfg.connect_timeout):
                said = await session(client, cfg.address())
        except TimeoutError:
            said = "unreachable: no session in time"
        if said != "ok":
            self._abort(client)
            if said == "refused":
                raise kit.CredentialsRefused(
                    f"XMPP server refused channels.xmpp.password for {cfg.jid}"
                )
            raise kit.Unreachable(f"XMPP server not reachable at {where} ({said})")
        self._gone = asyncio.Event()
        client.add_event_handler("disconnected", lambda _e: self._gone.set())
        client.add_event_handler("message", self._on_message)
        client.add_event_handler("groupchat_presence", self._on_presence)
        self.client = client
        return f"{client.boundjid.full} on {where}"

    @staticmethod
    def _abort(client: slixmpp.ClientXMPP) -> None:
        with contextlib.suppress(Exception):
            client.abort()

    # -- serve -----------------------------------------------------------------------------
    async def serve(self) -> None:
        backoff = kit.Backoff(0.5, 60.0)
        while True:
            await self._session(backoff)
            if self.stopping or not await self.failed(
                kit.Unreachable("XMPP connection lost"), backoff
            ):
                return
            while True:
                try:
                    await self.connect()
                    break
                except kit.CredentialsRefused:
                    raise
                except kit.NotDelivered as exc:
                    if not await self.failed(exc, backoff):
                        return

    async def _session(self, backoff: kit.Backoff) -> None:
        client = self.client
        assert client is not None
        client.send_presence()
        self.joined.clear()
        for room in self.cfg.rooms:
            await self._join(client, room)
        backoff.reset()
        self.up()
        await self._gone.wait()

    async def _join(self, client: slixmpp.ClientXMPP, room: str) -> None:
        muc = client.plugin["xep_0045"]
        try:
            _me, _subject, occupants, _history = await muc.join_muc_wait(
                slixmpp.JID(room), self.nick, maxstanzas=0, timeout=15
            )
        except Exception as exc:  # noqa: BLE001 - slixmpp raises its own for a refusal
            self.log.warning("XMPP: room {} not joined ({!r}): see channels.xmpp.rooms", room, exc)
            return
        self._occupants[room] = {p["from"].resource for p in occupants}
        self.joined.add(room)

    # -- what comes in ---------------------------------------------------------------------
    def _on_presence(self, presence: Any) -> None:
        room, nick = presence["from"].bare, presence["from"].resource
        if room not in self.joined or not nick or nick == self.nick:
            return
        seen = self._occupants.setdefault(room, set())
        if presence["type"] == "unavailable":
            seen.discard(nick)
            return
        if nick in seen:
            return
        seen.add(nick)
        event = kit.member_joined(self.platform, f"group:{room}", f"{room}/{nick}", nick)

        async def read() -> list[Any]:
            return [event]

        self.inbound.events(f"group:{room}", read)

    def _on_message(self, msg: Any) -> None:
        kind = msg["type"]
        body = str(msg["body"] or "")
        if kind not in ("chat", "normal", "groupchat") or not body:
            return  # errors, chat states, receipts
        if kind == "groupchat":
            self._groupchat(msg, body)
            return
        sender = msg["from"].bare
        if sender == self.client_jid():
            return
        ident = self._stanza_id(msg, sender=self.client_jid())
        chat = f"private:{sender}"

        async def read() -> IncomingMessage | None:
            return self.incoming(
                chat,
                sender,
                body,
                is_group=False,
                sender_name=sender.split("@", 1)[0],
                message_id=ident or None,
                time=_sent_at(msg),
            )

        self.inbound.message(chat, ident, read)

    def _groupchat(self, msg: Any, body: str) -> None:
        room, nick = msg["from"].bare, msg["from"].resource
        if room not in self.joined or not nick or nick == self.nick:
            return  # the room's subject, the bot's own echo
        if msg.xml.find("{urn:xmpp:delay}delay") is not None:
            return  # the room's history
        mentioned, text = self._mention(body)
        ident = self._stanza_id(msg, sender=room)
        chat = f"group:{room}"
        roles = self._roles(room, nick)

        async def read() -> IncomingMessage | None:
            return self.incoming(
                chat,
                f"{room}/{nick}",
                text,
                is_group=True,
                sender_name=nick,
                chat_name=room,
                is_at_bot=mentioned,
                message_id=ident or None,
                sender_roles=roles,
                time=_sent_at(msg),
            )

        self.inbound.message(chat, ident, read)

    def _stanza_id(self, msg: Any, *, sender: str) -> str:
        """The XEP-0359 stanza-id the server (1:1) or the room (MUC) gave; "" when none."""
        for element in msg.xml.findall("{urn:xmpp:sid:0}stanza-id"):
            if element.get("by") == sender and element.get("id"):
                return str(element.get("id"))
        return ""

    def _roles(self, room: str, nick: str) -> list[str]:
        assert self.client is not None
        muc = self.client.plugin["xep_0045"]
        try:
            affiliation = muc.get_jid_property(slixmpp.JID(room), nick, "affiliation")
            role = muc.get_jid_property(slixmpp.JID(room), nick, "role")
        except Exception:  # noqa: BLE001 - an occupant slixmpp does not know
            return []
        if affiliation in _ADMIN_AFFILIATIONS:
            return [_ADMIN_AFFILIATIONS[affiliation]]
        return ["admin"] if role == "moderator" else []

    def _mention(self, text: str) -> tuple[bool, str]:
        nick = re.escape(self.nick)
        lead = re.match(rf"^\s*@?{nick}\s*[:,]\s*", text, re.IGNORECASE)
        if lead:
            return True, text[lead.end() :]
        return re.search(rf"(?<!\w)@?{nick}(?!\w)", text, re.IGNORECASE) is not None, text

    def client_jid(self) -> str:
        return self.client.boundjid.bare if self.client is not None else self.cfg.jid

    # -- out -------------------------------------------------------------------------------
    async def send_body(self, ref: ChatRef, body: str, origin: str, oob: str | None = None) -> None:
        client = self.client
        if client is None or self._gone.is_set() or not self.connected:
            raise kit.Unreachable("the XMPP channel is not connected")
        msg = client.make_message(
            mto=slixmpp.JID(ref.jid), mbody=body, mtype="groupchat" if ref.is_group else "chat"
        )
        msg["origin_id"]["id"] = origin
        if oob:
            msg["oob"]["url"] = oob
        msg.send()

    async def upload(self, data: bytes) -> str:
        """`data` (an image) through the server's HTTP upload (XEP-0363): its URL.
        DeliveryRefused when the server offers none or refuses the size."""
        client = self.client
        if client is None or self._gone.is_set():
            raise kit.Unreachable("the XMPP channel is not connected")
        kind = kit.image_mime(data) or "image/png"
        try:
            return str(
                await client.plugin["xep_0363"].upload_file(
                    kit.image_name(data),
                    size=len(data),
                    content_type=kind,
                    input_file=io.BytesIO(data),
                    timeout=30,
                )
            )
        except (OSError, TimeoutError) as exc:
            raise kit.Unreachable(f"XMPP HTTP upload failed ({exc!r})") from None
        except Exception as exc:  # noqa: BLE001 - slixmpp's UploadServiceNotFound, FileTooBig
            raise kit.DeliveryRefused(f"XMPP server took no image ({exc!r})") from None

    # -- close and tests -------------------------------------------------------------------
    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.disconnect(wait=1.0), 3)
            self._abort(client)

    async def drop_connection(self) -> None:
        """Cut the connection (tests): the channel reconnects and rejoins."""
        if self.client is not None and self.client.transport is not None:
            self.client.transport.abort()


def _sent_at(msg: Any) -> Any:
    stamp = msg["delay"]["stamp"] if msg.xml.find("{urn:xmpp:delay}delay") is not None else None
    return kit.sent_at(stamp.isoformat()) if stamp is not None else kit.sent_at(None)
