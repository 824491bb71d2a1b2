"""The way out to XMPP: a reply as `<message>` stanzas (`type="chat"` to a user,
`type="groupchat"` to a room), its Markdown made plain, split within `max_message_length`.

Every stanza carries an XEP-0359 `<origin-id>` naming the outbox row and the part
(`chatfn-<row>-<index>`), so a copy a client sees twice can be told for one. A group reply
addresses its user as XMPP clients do: `nick: ` before the first part. An image is put on
the server's HTTP upload service (XEP-0363) and its URL sent as an XEP-0066 out-of-band link
with the URL as the body, as Conversations and Dino send images (an image given as a URL is
sent so directly). A spoken reply (voice.tts) goes last the same way: converted to OGG/Opus
(which Conversations, Dino and Gajim play), uploaded as `voice-<hash>.ogg` of type
audio/ogg and sent as an out-of-band link; one that cannot be converted or that the server
refuses is one log line (the text has gone).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.sender import SocketSender
from chatfn.channels.kit.voice import spoken_audio, unsent
from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["MAX_IMAGE_OUT", "ChatRef", "XmppSender", "parse_chat_id", "parts_of"]

#: The largest image sent (the server's upload service may take less: it says so).
MAX_IMAGE_OUT = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ChatRef:
    is_group: bool
    jid: str  # a room's JID, or a user's bare JID

    @property
    def key(self) -> str:
        return f"{'group' if self.is_group else 'private'}:{self.jid}"


def parse_chat_id(chat_id: str) -> ChatRef:
    kind, _, jid = chat_id.partition(":")
    local, at, domain = jid.partition("@")
    if kind in ("group", "private") and at and local and domain and "/" not in jid:
        return ChatRef(kind == "group", jid)
    raise ValueError(
        f"not an XMPP chat id: {chat_id!r} (expected group:room@server or private:user@server)"
    )


def parts_of(out: OutgoingMessage, ref: ChatRef, limit: int) -> list[str]:
    """The bodies `out`'s text is sent as, the mention before the first."""
    # a room's occupant is `room@server/nick`: addressed by the nick
    first = f"{out.at.rsplit('/', 1)[-1]}: " if ref.is_group and out.at else ""
    if not out.text.strip():
        return []
    parts = [to_plain(p) for p in split_message(out.text, limit - len(first), render=to_plain)]
    parts = [p for p in parts if p.strip()]
    if parts and first:
        parts[0] = first + parts[0]
    return parts


class _Client(Protocol):
    async def send_body(
        self, ref: ChatRef, body: str, origin: str, oob: str | None = None
    ) -> None: ...

    async def upload(self, data: bytes, name: str = "", content_type: str = "") -> str: ...


class XmppSender(SocketSender[ChatRef], platform="xmpp", label="XMPP"):
    client: _Client
    cfg: XmppSettings

    parse_chat = staticmethod(parse_chat_id)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> Any:
        parts = parts_of(out, ref, self.cfg.max_message_length)
        owed.parts = parts
        row = out.event_id or 0
        for index, body in enumerate(parts):
            origin = f"chatfn-{row}-{index}"
            await self.call(ref.key, lambda b=body, o=origin: self.client.send_body(ref, b, o))  # type: ignore[misc]
            owed.sent += 1
        for index, image in enumerate(out.images):
            data = kit.decode_image(image, MAX_IMAGE_OUT, "XMPP")
            if isinstance(data, bytes):  # to the server's HTTP upload first (XEP-0363)
                url = await self.call(ref.key, lambda d=data: self.client.upload(d))  # type: ignore[misc]
            else:
                url = data
            origin = f"chatfn-{row}-image{index}"
            await self.call(ref.key, lambda u=url, o=origin: self.client.send_body(ref, u, o, u))  # type: ignore[misc]
        for index, voice in enumerate(out.audio):  # the reply spoken (voice.tts)
            await self._send_voice(ref, f"chatfn-{row}-voice{index}", voice)
        return None

    async def _send_voice(self, ref: ChatRef, origin: str, voice: str) -> None:
        """A spoken reply as OGG/Opus on the server's HTTP upload, sent as an XEP-0066 link
        after its text; one log line when it cannot be converted or the server refuses it."""
        with unsent(logger, "XMPP", ref.key):
            ogg = await audio.to_ogg_opus(spoken_audio(voice, "XMPP needs a file to upload"))
            name = f"voice-{hashlib.sha256(ogg).hexdigest()[:12]}.ogg"
            url = await self.call(ref.key, lambda: self.client.upload(ogg, name, "audio/ogg"))
            await self.call(ref.key, lambda: self.client.send_body(ref, url, origin, url))
