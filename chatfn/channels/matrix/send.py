"""The way out to Matrix: one ordered queue per room, Markdown as `org.matrix.custom.html`,
long replies split, images uploaded and sent as `m.image`, M_LIMIT_EXCEEDED waited out in
place, and never a message twice.

- Never twice: every event is sent with `PUT /rooms/{roomId}/send/{eventType}/{txnId}`, and the
  homeserver answers a transaction id it has seen (for this device) with the event it made the
  first time instead of making another
  (https://spec.matrix.org/v1.16/client-server-api/#transaction-identifiers). The id is made
  from the outbox row (`OutgoingMessage.event_id`), the part's place in the message and a hash
  of the part: the same row sent again after a crash between the send and the delivery mark,
  or after a dropped connection, gives the same ids, so a part that did go out is not
  repeated; a message cut short (a long rate limit) is simply sent whole again later, its
  first parts deduplicated by the server. The hash keeps a reused row id (a new database) from
  matching an old transaction of different words.
- Order and pace: the kit's (chatfn/channels/kit/sender.py), one queue per room.
- M_LIMIT_EXCEEDED (HTTP 429, `retry_after_ms`): the same request (same transaction id) is
  made again after that wait, up to `max_retry_after` (the delivery policy); longer, the
  message stays in the outbox until the wait has passed, and nothing is sent to any room
  before then (the limit is the account's).
- Threads: the answer to a message said in a thread (`rel_type: m.thread`) goes into that
  thread, with the reply fallback for clients without threads.
- Mentions: `reply_with_mention` writes a pill (`<a href="https://matrix.to/#/@user:server">`)
  and lists the user in `m.mentions`; every message carries `m.mentions` (empty when it
  mentions nobody), so a model writing "@room" pings no one.
- Images: a data URI's bytes (or an https URL's, fetched, at most 10 MB) are uploaded to the
  media repository and sent as `m.image`; the text's last part rides along as the image's
  caption (`body` + `filename`, spec 1.10 media captions) when it is short.
- Errors: a network error, a timeout, a 5xx or a refused token raises NotDelivered (the outbox
  keeps it); M_FORBIDDEN (not in the room, no permission), M_TOO_LARGE and the like raise
  DeliveryRefused. Encrypted rooms are refused: this channel does not do end-to-end
  encryption, and sending plain text into an encrypted room would leak the reply.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Awaitable, Callable
from html import escape
from typing import Any

import aiohttp
from nio import AsyncClient, ErrorResponse, RoomSendResponse, UploadResponse

from chatfn.channels import kit
from chatfn.channels.kit.fit import fitted_parts
from chatfn.channels.kit.hold import AccountHold
from chatfn.channels.kit.keys import part_key
from chatfn.channels.kit.media import caption_from
from chatfn.channels.kit.recent import Recent
from chatfn.channels.kit.uploads import Upload, image_upload
from chatfn.channels.matrix.format import to_body, to_html
from chatfn.channels.matrix.parse import HTML_FORMAT, ChatRef, parse_chat_id
from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.common.fetch import FetchAllow
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy

__all__ = ["CAPTION_LIMIT", "EVENT_BUDGET", "MatrixSender", "transaction_id"]

#: Bytes of `body` + `formatted_body` one event may use: events are capped at 65536 bytes of
#: JSON (https://spec.matrix.org/v1.16/client-server-api/#size-limits), and the rest of the
#: event (ids, signatures, hashes, the mention) needs a few hundred.
EVENT_BUDGET = 60000
CAPTION_LIMIT = 1024
THREADS_KEPT = 5000
MAX_IMAGE_BYTES = 10 * 1024 * 1024
_TOKEN_REFUSED = {"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"}


def transaction_id(out: OutgoingMessage, index: int, part: str) -> str:
    """The transaction id of the `index`th event of `out` (see the module docstring)."""
    return part_key(out.event_id, index, f"{out.chat_id}\0{part}")


class MatrixSender(kit.PlatformSender[ChatRef], platform="matrix", label="Matrix"):
    """Sends OutgoingMessages with a matrix-nio `AsyncClient` (logged in by the channel)."""

    def __init__(
        self,
        client: AsyncClient,
        settings: MatrixSettings,
        *,
        name_of: Callable[[str, str], str] | None = None,
        encrypted: Callable[[str], bool] | None = None,
        fetch_allow: FetchAllow | None = None,
        policy: DeliveryPolicy | None = None,
    ) -> None:
        super().__init__(client, settings, policy)
        # `bot.fetch`: the internal hosts and networks an image URL may be on.
        self.fetch_allow = fetch_allow
        self.name_of = name_of or (lambda _room, user: user)
        self.encrypted = encrypted or (lambda _room: False)
        self.sent_events = 0  # events the homeserver accepted (health, tests)
        self.hold = AccountHold()  # a long M_LIMIT_EXCEEDED: the limit is the account's
        # Event id of a message said in a thread -> the thread's root: the answer goes into
        # the same thread (remembered for the last THREADS_KEPT such messages of this run).
        self.threads: Recent[str, str] = Recent(THREADS_KEPT)

    # -- splitting -----------------------------------------------------------------------------
    def split(self, text: str) -> list[str]:
        """Parts within `max_message_length` characters of plain text and EVENT_BUDGET bytes
        of body plus HTML (kit/fit.py: each part rendered once, not every candidate cut)."""
        limit = self.cfg.max_message_length

        def over(part: str) -> float:
            body = to_body(part)
            used = len(body.encode()) + len(to_html(part).encode())
            return max(len(body) / limit, used / EVENT_BUDGET)

        return fitted_parts(text, limit, over)

    # -- delivery ------------------------------------------------------------------------------
    def parse_chat(self, chat_id: str) -> ChatRef:
        ref = parse_chat_id(chat_id)
        if self.encrypted(ref.room_id):
            raise ValueError(
                f"{ref.key} is an encrypted room: the Matrix channel does not do end-to-end "
                "encryption (invite the bot to an unencrypted room)"
            )
        return ref

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        """Every event of `out`; a message cut short is sent whole again later, its parts
        that went out deduplicated by their transaction ids (owed stays empty)."""
        mention = out.at if out.at and ref.is_group and out.at.startswith("@") else None
        parts = self.split(out.text) if out.text.strip() else []
        images = list(out.images or [])
        fits = lambda last: len(to_body(last)) <= CAPTION_LIMIT  # noqa: E731
        caption = caption_from(parts, bool(images), fits)
        reply_to = out.reply_to if out.quote and out.reply_to else None
        thread = (self.threads.get(out.reply_to or ""), out.reply_to)
        index = 0
        for number, part in enumerate(parts):
            first = number == 0
            content = self._text_content(
                ref, part, mention if first else None, reply_to if first else None, thread
            )
            await self._send(ref, transaction_id(out, index, part), content)
            index += 1
        for number, ref_image in enumerate(images):
            first = number == 0
            image = await self._image_bytes(ref_image)
            label = caption if first else None
            content = await self._image_content(
                ref,
                image,
                label,
                mention if first and not parts else None,
                reply_to if first and not parts else None,
                thread,
            )
            await self._send(
                ref, transaction_id(out, index, f"{ref_image[:200]}\0{label}"), content
            )
            index += 1
        for ref_voice in getattr(out, "audio", None) or []:  # the reply spoken (voice.tts)
            if not ref_voice.startswith("data:audio/"):
                continue
            voice = Upload(base64.b64decode(ref_voice.partition(",")[2]), "audio/ogg", "voice.ogg")
            content = {
                "msgtype": "m.audio",
                "body": "Voice message",
                "filename": voice.name,
                "url": await self._upload(ref, voice),
                "info": {"mimetype": voice.mime, "size": len(voice.data)},
                "org.matrix.msc3245.voice": {},  # Element shows it as a voice message
            }
            if (relation := self._relation(thread[0], None, thread[1])) is not None:
                content["m.relates_to"] = relation
            await self._send(ref, transaction_id(out, index, f"voice\0{ref_voice[-64:]}"), content)
            index += 1

    # -- event contents ------------------------------------------------------------------------
    def _mention(self, ref: ChatRef, user: str | None) -> tuple[str, str]:
        if user is None:
            return "", ""
        name = self.name_of(ref.room_id, user) or user
        pill = f'<a href="https://matrix.to/#/{escape(user, quote=True)}">{escape(name)}</a>: '
        return f"{name}: ", pill

    def note_thread(self, event_id: str, root: str) -> None:
        self.threads.put(event_id, root)

    @staticmethod
    def _relation(thread: str | None, reply_to: str | None, answered: str | None) -> Any:
        """`m.relates_to` of one event: a rich reply, or a thread event (with the reply
        fallback clients without threads show: `is_falling_back` unless it really quotes)."""
        if thread is not None:
            return {
                "rel_type": "m.thread",
                "event_id": thread,
                "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or answered or thread},
            }
        if reply_to:
            return {"m.in_reply_to": {"event_id": reply_to}}
        return None

    def _text_content(
        self,
        ref: ChatRef,
        part: str,
        mention: str | None,
        reply_to: str | None,
        thread: tuple[str | None, str | None] = (None, None),
    ) -> dict[str, Any]:
        plain, pill = self._mention(ref, mention)
        content: dict[str, Any] = {
            "msgtype": "m.text",
            "body": plain + to_body(part),
            "format": HTML_FORMAT,
            "formatted_body": pill + to_html(part),
            "m.mentions": {"user_ids": [mention]} if mention else {},
        }
        if (relation := self._relation(thread[0], reply_to, thread[1])) is not None:
            content["m.relates_to"] = relation
        return content

    async def _image_content(
        self,
        ref: ChatRef,
        image: Upload,
        caption: str | None,
        mention: str | None,
        reply_to: str | None,
        thread: tuple[str | None, str | None] = (None, None),
    ) -> dict[str, Any]:
        url = await self._upload(ref, image)
        info: dict[str, Any] = {"mimetype": image.mime, "size": len(image.data)}
        if (size := image.size()) is not None:
            info["w"], info["h"] = size
        content: dict[str, Any] = {
            "msgtype": "m.image",
            "body": image.name,
            "filename": image.name,
            "url": url,
            "info": info,
            "m.mentions": {"user_ids": [mention]} if mention else {},
        }
        if caption is not None or mention:
            plain, pill = self._mention(ref, mention)
            content["body"] = plain + (to_body(caption) if caption else "")
            content["format"] = HTML_FORMAT
            content["formatted_body"] = pill + (to_html(caption) if caption else "")
        if (relation := self._relation(thread[0], reply_to, thread[1])) is not None:
            content["m.relates_to"] = relation
        return content

    async def _image_bytes(self, ref: str) -> Upload:
        # A function's URL is fetched by the bot (the homeserver cannot fetch it for us).
        return await image_upload(ref, MAX_IMAGE_BYTES, self.fetch_allow)

    # -- homeserver calls ----------------------------------------------------------------------
    async def _upload(self, ref: ChatRef, image: Upload) -> str:
        async def call() -> Any:
            response, _keys = await self.client.upload(
                io.BytesIO(image.data),
                content_type=image.mime,
                filename=image.name,
                filesize=len(image.data),
            )
            return response

        response = await self._call(ref, call)
        assert isinstance(response, UploadResponse)
        return str(response.content_uri)

    async def _send(self, ref: ChatRef, txn: str, content: dict[str, Any]) -> None:
        async def call() -> Any:
            return await self.client.room_send(ref.room_id, "m.room.message", content, tx_id=txn)

        response = await self._call(ref, call)
        assert isinstance(response, RoomSendResponse)
        self.sent_events += 1

    async def _call(self, ref: ChatRef, call: Callable[[], Awaitable[Any]]) -> Any:
        """One homeserver call for the room (the kit's: paced, rate limits as the policy
        says), its answer sorted: NotDelivered (try later) or DeliveryRefused (never)."""

        async def once() -> Any:
            self.hold.check(self.label)
            try:
                response = await call()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise kit.Unreachable(f"Matrix homeserver not reachable ({exc!r})") from None
            if not isinstance(response, ErrorResponse):
                return response
            code = str(response.status_code or "")
            status = getattr(response.transport_response, "status", 0) or 0
            if code == "M_LIMIT_EXCEEDED" or status == 429:
                wait = (response.retry_after_ms or 5000) / 1000
                # The limit is the account's (Synapse's rc_message is per user).
                self.hold.asked(wait, self.policy.limit(self.platform))
                raise kit.RateLimited(
                    f"Matrix asks to wait {wait:.0f} s before sending to {ref.key}", wait
                )
            why = f"{ref.key}: {code or status} {response.message}"
            if code in _TOKEN_REFUSED:
                raise kit.CredentialsRefused(f"Matrix refused the access token sending to {why}")
            if status >= 500 or status == 0:
                raise kit.Unreachable(f"Matrix did not take the message to {why}")
            raise kit.DeliveryRefused(f"Matrix refused the message to {why}")

        return await self.call(ref.key, once)
