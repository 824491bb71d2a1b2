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
- voice in: a message that is only a link to an audio file (by its name: .m4a, .ogg, .opus,
  ...) is a voice message, as Conversations and Dino send one: an XEP-0066 out-of-band link
  with the URL as the body after an XEP-0363 HTTP upload, or an `aesgcm://` link (XEP-0454,
  a file encrypted for OMEMO: fetched over https, decrypted with AES-256-GCM, the IV and key
  in the link's fragment). It is downloaded within `bot.fetch`'s bounds
  (chatfn.common.fetch) and handed on as the message's audio for voice.stt; one that cannot
  be fetched or decrypted is one log line and the link stays the message's text;
- out: send.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

import slixmpp

from chatfn.channels import kit
from chatfn.channels.xmpp.send import ChatRef, XmppSender
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.common import audio
from chatfn.common.fetch import FetchError, fetch
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = [
    "AUDIO_FILES",
    "XmppChannel",
    "aesgcm_link",
    "decrypt_aesgcm",
    "make_client",
    "voice_link",
]

#: The file names a link to a voice message ends in (Conversations records .m4a or .oga/.opus,
#: Dino and Gajim send what they recorded or were given).
AUDIO_FILES = frozenset(
    {
        ".m4a",
        ".mp4a",
        ".aac",
        ".ogg",
        ".oga",
        ".opus",
        ".mp3",
        ".wav",
        ".flac",
        ".amr",
        ".3gp",
        ".webm",
    }
)
#: The largest voice file downloaded (voice.stt refuses longer speech anyway).
MAX_VOICE_IN = 20 * 1024 * 1024
_OOB_URL = "{jabber:x:oob}x/{jabber:x:oob}url"

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


class XmppChannel(kit.SessionChannel[XmppSettings], platform="xmpp", label="XMPP"):
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
        except BaseException:  # cancelled (a probe given up): the client is not kept to close
            self._abort(client)
            raise
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
        """Close `client`'s connection, and stop its connection attempt when it has none yet
        (slixmpp's abort() alone leaves that attempt running, and trying again later)."""
        with contextlib.suppress(Exception):
            client.cancel_connection_attempt()
            client.abort()

    # -- serve -----------------------------------------------------------------------------
    async def session(self, backoff: kit.Backoff) -> Exception:
        client = self.client
        assert client is not None
        client.send_presence()
        self.joined.clear()
        for room in self.cfg.rooms:
            await self._join(client, room)
        backoff.reset()
        self.up()
        await self._gone.wait()
        return kit.Unreachable("XMPP connection lost")

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
        link = voice_link(body, _oob_url(msg))

        async def read() -> IncomingMessage | None:
            voices = await self._voice(link, chat)
            return self.incoming(
                chat,
                sender,
                "" if voices else body,
                is_group=False,
                sender_name=sender.split("@", 1)[0],
                message_id=ident or None,
                time=_sent_at(msg),
                audio=voices,
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
        link = voice_link(body, _oob_url(msg))

        async def read() -> IncomingMessage | None:
            voices = await self._voice(link, chat)
            return self.incoming(
                chat,
                f"{room}/{nick}",
                "" if voices else text,
                audio=voices,
                is_group=True,
                sender_name=nick,
                chat_name=room,
                is_at_bot=mentioned,
                message_id=ident or None,
                sender_roles=roles,
                time=_sent_at(msg),
            )

        self.inbound.message(chat, ident, read)

    async def _voice(self, link: str | None, chat: str) -> list[str]:
        """The voice message `link` names, downloaded (and decrypted) as an audio data URI for
        voice.stt; [] when there is none or it cannot be had (one log line)."""
        if link is None:
            return []
        url, secret = link, None
        if link.startswith("aesgcm://"):
            found = aesgcm_link(link)
            if found is None:
                self.log.warning("XMPP voice in {}: an aesgcm link without its key", chat)
                return []
            url, secret = found[0], found[1:]
        allow = getattr(getattr(self.host.settings, "bot", None), "fetch", None)
        try:
            got = await fetch(
                url,
                allow=allow,
                max_bytes=MAX_VOICE_IN,
                timeout=30,
                accept=lambda kind: not kind.startswith("text/"),
            )
            data = got.data if secret is None else decrypt_aesgcm(got.data, *secret)
        except (FetchError, ValueError) as exc:
            self.log.warning("XMPP voice in {} not downloaded: {}", chat, exc)
            return []
        return [kit.data_uri(data, audio.audio_mime(data))]

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

    async def upload(self, data: bytes, name: str = "", content_type: str = "") -> str:
        """`data` (an image, or the file `name` of `content_type`) through the server's HTTP
        upload (XEP-0363): its URL. DeliveryRefused when the server offers none or refuses
        the size."""
        client = self.client
        if client is None or self._gone.is_set():
            raise kit.Unreachable("the XMPP channel is not connected")
        kind = content_type or kit.image_mime(data) or "image/png"
        try:
            return str(
                await client.plugin["xep_0363"].upload_file(
                    name or kit.image_name(data),
                    size=len(data),
                    content_type=kind,
                    input_file=io.BytesIO(data),
                    timeout=30,
                )
            )
        except (OSError, TimeoutError) as exc:
            raise kit.Unreachable(f"XMPP HTTP upload failed ({exc!r})") from None
        except Exception as exc:  # noqa: BLE001 - slixmpp's UploadServiceNotFound, FileTooBig
            raise kit.DeliveryRefused(f"XMPP server took no {kind} file ({exc!r})") from None

    # -- close and tests -------------------------------------------------------------------
    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            # What a plugin still queues once the stream is gone (the capabilities query that
            # answers a login just made, when a probe closes at once) cannot be sent: dropped
            # quietly, not logged by slixmpp as an error with a traceback.
            client.add_filter("out", lambda stanza: stanza if client.transport else None)
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


def _oob_url(msg: Any) -> str:
    found = msg.xml.find(_OOB_URL)
    return str(found.text or "").strip() if found is not None else ""


def voice_link(body: str, oob: str) -> str | None:
    """The link to a voice message a stanza is: its XEP-0066 URL when the body is that URL
    (or empty), else a body that is one http(s) or aesgcm link; either naming an audio file
    (AUDIO_FILES). None for anything else (text, an image, a page)."""
    text = body.strip()
    link = oob if oob and text in ("", oob) else text
    if not link or any(c.isspace() for c in link):
        return None
    parts = urlsplit(link)
    if parts.scheme not in ("http", "https", "aesgcm") or not parts.netloc:
        return None
    return link if PurePosixPath(unquote(parts.path)).suffix.lower() in AUDIO_FILES else None


def aesgcm_link(link: str) -> tuple[str, bytes, bytes] | None:
    """(the https URL, the IV, the key) of an XEP-0454 `aesgcm://` link: its fragment is the
    IV (12 bytes, or 16 as older clients made it) then the 32-byte key, in hex; None when the
    fragment is not that."""
    url, _, fragment = link.partition("#")
    try:
        secret = bytes.fromhex(fragment)
    except ValueError:
        return None
    if len(secret) not in (44, 48):
        return None
    return "https://" + url.removeprefix("aesgcm://"), secret[:-32], secret[-32:]


def decrypt_aesgcm(data: bytes, iv: bytes, key: bytes) -> bytes:
    """An XEP-0454 file (AES-256-GCM, the 16-byte tag after the ciphertext) decrypted;
    ValueError when it does not decrypt with `key` (or `cryptography` is missing)."""
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ValueError('an aesgcm file needs cryptography: pip install "chatfn[xmpp]"') from None
    try:
        return AESGCM(key).decrypt(iv, data, None)
    except InvalidTag:
        raise ValueError("the aesgcm file does not decrypt with its link's key") from None
