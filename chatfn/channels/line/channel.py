"""The LINE channel: the Messaging API's webhook in, reply tokens and the push API out
(send.py), through the official SDK (line-bot-sdk v3).

The webhook (https://developers.line.biz/en/reference/messaging-api/#webhooks): LINE POSTs a
JSON body of `events` to `webhook_path`, signed in `X-Line-Signature`: the base64 HMAC-SHA256
of the body with the channel secret (https://developers.line.biz/en/reference/messaging-api/
#signature-validation). The SDK's WebhookParser checks it and reads the events; a bad or
missing signature is answered 400 and nothing is read, a body that is not LINE's JSON 400.
The console's "Verify" button sends `events: []`, answered 200.

Chats: a user (`private:U...`), a group (`group:C...`) or a multi-person chat, a room
(`group:R...`); in groups and rooms the bot is mentioned when a `mention.mentionees` entry has
`isSelf` (the mention cut from the text). Images: the content endpoint on api-data.line.me
(`content.provider.type` "line"), or the URL LINE names ("external", fetched through
chatfn.common.fetch). Members joining a group or room: the member-joined event, with their
names from the member profile.

Confirm once stored: the webhook is answered 200 once its messages are stored (within
`ack_wait` seconds), else 500, and LINE, with webhook redelivery on, sends the events again
(`deliveryContext.isRedelivery`, the same `webhookEventId`, which is taken once).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from linebot.v3.exceptions import InvalidSignatureError
from linebot.v3.webhook import WebhookParser
from linebot.v3.webhooks import (
    AudioMessageContent,
    GroupSource,
    ImageMessageContent,
    MemberJoinedEvent,
    MessageEvent,
    RoomSource,
    TextMessageContent,
)

from chatfn.channels import kit
from chatfn.channels.kit import webhook
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.wire import webhook_bytes
from chatfn.channels.line.api import NETWORK_ERRORS, LineApi, LineError
from chatfn.channels.line.media import MEDIA_ROUTE, MediaShelf
from chatfn.channels.line.send import ERRORS, LineSender, Replies
from chatfn.channels.line.settings import LineSettings
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage, SystemEvent
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["MAX_BODY", "LineChannel", "cut_mentions"]

MAX_BODY = 1024 * 1024
_ERRORS: tuple[type[BaseException], ...] = (LineError, *NETWORK_ERRORS)


def cut_mentions(text: str, mentionees: list[Any]) -> tuple[str, bool]:
    """`text` without the bot's own mentions (`isSelf`; `index` and `length` count UTF-16
    units), and whether there was one."""
    own = sorted(
        (m for m in mentionees if getattr(m, "is_self", False)),
        key=lambda m: m.index,
        reverse=True,
    )
    units = text.encode("utf-16-le")
    for m in own:
        start, end = 2 * int(m.index), 2 * (int(m.index) + int(m.length))
        if 0 <= start <= end <= len(units):
            units = units[:start] + units[end:]
    return units.decode("utf-16-le", errors="replace"), bool(own)


def _chat_of(source: Any) -> tuple[str, str, str] | None:
    """(kind: user/group/room, the chat's id, the speaker's user id) of an event's source."""
    if isinstance(source, GroupSource):
        return "group", source.group_id, source.user_id or ""
    if isinstance(source, RoomSource):
        return "room", source.room_id, source.user_id or ""
    user = getattr(source, "user_id", None)
    return ("user", user, user) if user else None


def _chat_id(kind: str, ident: str) -> str:
    return f"private:{ident}" if kind == "user" else f"group:{ident}"


class LineChannel(kit.PlatformChannel[LineSettings], platform="line", label="LINE"):
    def __init__(self, host: ChannelHost, settings: LineSettings) -> None:
        super().__init__(host, settings)
        self.parser = WebhookParser(settings.secret_text("channel_secret"))
        self.api = LineApi(settings)
        self.replies = Replies(settings.reply_token_ttl)
        self.media: MediaShelf | None = None
        if settings.public_url:
            self.media = MediaShelf(settings.public_url, settings.media_ttl)
            host.add_web_route("GET", MEDIA_ROUTE, self.media.serve)
        self.sender = LineSender(self.api, settings, self.policy, self.replies, self.media)
        self.bot_id = ""
        self._names: dict[tuple[str, str], str] = {}
        host.add_web_route("POST", settings.webhook_path, self._webhook)

    async def connect(self) -> str:
        try:
            self.bot_id, name = await self.api.bot_info()
        except ERRORS.every as exc:
            fix = "issue a new one in the LINE Developers console (Messaging API tab)"
            raise ERRORS.for_connect(exc, self.cfg.api_base, fix) from None
        return f"{name} ({self.bot_id}), webhook at {self.cfg.webhook_path}"

    #: Seconds between the credential checks while serving (GET /v2/bot/info; the kit's serve).
    keepalive: float | None = 300.0

    async def close(self) -> None:
        await self.api.aclose()

    # -- the webhook -------------------------------------------------------------------------
    async def _webhook(self, request: web.Request) -> web.Response:
        body = await webhook_bytes(request, MAX_BODY)
        signature = request.headers.get("X-Line-Signature", "")
        try:
            events = self.parser.parse(body.decode(), signature)
        except InvalidSignatureError:
            self.log.warning("LINE webhook refused: bad X-Line-Signature")
            return web.Response(status=400, text="bad signature")
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            self.log.warning("LINE webhook refused: not a webhook body")
            return web.Response(status=400, text="malformed")
        ok = web.Response(text="ok")  # not stored in time: a 500, and LINE redelivers
        return await webhook.answer(
            self, lambda: [self._event(e) for e in events], self.cfg.ack_wait, ok, late=500
        )

    def _event(self, event: Any) -> kit.Taken:
        chat = _chat_of(getattr(event, "source", None))
        if chat is None:
            return kit.settled()
        key = getattr(event, "webhook_event_id", None) or id(event)
        if isinstance(event, MessageEvent) and isinstance(
            event.message, TextMessageContent | ImageMessageContent | AudioMessageContent
        ):
            return self.inbound.once(key, lambda previous: self._take(event, chat, previous))
        if isinstance(event, MemberJoinedEvent):
            chat_id = _chat_id(chat[0], chat[1])
            if self.inbound.first_sight(key):
                self.inbound.events(chat_id, lambda: self._joined(event, chat))
        return kit.settled()

    def _take(self, event: MessageEvent, chat: tuple[str, str, str], previous: Any) -> kit.Taken:
        chat_id = _chat_id(chat[0], chat[1])
        message = event.message
        self.replies.add(message.id, event.reply_token, getattr(message, "quote_token", None))
        taken = kit.Taken(previous)
        self.inbound.message(chat_id, message.id, lambda: self._incoming(event, chat), taken)
        return taken

    async def _joined(
        self, event: MemberJoinedEvent, chat: tuple[str, str, str]
    ) -> list[SystemEvent]:
        out = []
        for member in event.joined.members or []:
            user = getattr(member, "user_id", None)
            if user:
                name = await self._name(chat, user)
                out.append(
                    kit.member_joined("line", _chat_id(chat[0], chat[1]), user, name or user)
                )
        return out

    async def _name(self, chat: tuple[str, str, str], user: str) -> str:
        """A user's display name (remembered; "" when LINE will not say)."""
        key = (chat[1], user)
        if key not in self._names:
            try:
                self._names[key] = await self.api.profile(chat[0], chat[1], user)
            except _ERRORS as exc:
                self.log.debug("LINE profile of {} not read: {}", user, exc)
                return ""
            if len(self._names) > 5000:
                self._names.pop(next(iter(self._names)))
        return self._names[key]

    async def _incoming(
        self, event: MessageEvent, chat: tuple[str, str, str]
    ) -> IncomingMessage | None:
        kind, ident, user = chat
        message = event.message
        text, at_bot, images, voices = "", False, [], []
        if isinstance(message, TextMessageContent):
            mentionees = list(message.mention.mentionees) if message.mention else []
            text, at_bot = cut_mentions(message.text, mentionees)
        elif isinstance(message, AudioMessageContent):
            voice = await self._voice(message)
            voices = [voice] if voice else []
        else:
            image = await self._image(message)
            images = [image] if image else []
        return self.incoming(
            _chat_id(kind, ident),
            user,
            text,
            sender_name=await self._name(chat, user) if user else "",
            is_group=kind != "user",
            is_at_bot=at_bot,
            message_id=message.id,
            time=kit.sent_at(event.timestamp, ms=True),
            images=images,
            audio=voices,
        )

    async def _voice(self, message: AudioMessageContent) -> str | None:
        """A voice message (LINE's audio, M4A) as an audio data URI for voice.stt; one its
        owner serves (`contentProvider` external) by its URL, fetched by voice.stt within
        `bot.fetch`'s bounds."""
        provider = message.content_provider
        if provider is not None and provider.type == "external" and provider.original_content_url:
            return str(provider.original_content_url)
        data = await self._content("voice", message.id)
        return None if data is None else kit.data_uri(data, audio.audio_mime(data))

    async def _image(self, message: ImageMessageContent) -> str | None:
        provider = message.content_provider
        if provider is not None and provider.type == "external" and provider.original_content_url:
            return await self._external(provider.original_content_url)
        data = await self._content("image", message.id)
        mime = None if data is None else kit.image_mime(data)
        return None if data is None or mime is None else kit.data_uri(data, mime)

    async def _content(self, what: str, message_id: str) -> bytes | None:
        """A message's file from LINE's content API (kit/downloads.py)."""
        what = f"LINE {what} {message_id}"
        content, limit = self.api.content, kit.MAX_IMAGE_IN
        return await downloaded(what, _ERRORS, content, message_id, limit, log=self.log)

    async def _external(self, url: str) -> str | None:
        """An image LINE names by its owner's URL: fetched within `bot.fetch`'s bounds."""
        from chatfn.common.fetch import FetchError, fetch

        allow = getattr(getattr(self.host.settings, "bot", None), "fetch", None)
        try:
            got = await fetch(url, allow=allow, max_bytes=kit.MAX_IMAGE_IN, timeout=15)
        except FetchError as exc:
            self.log.warning("LINE image at its provider's URL not fetched: {}", exc)
            return None
        mime = kit.image_mime(got.data)
        return None if mime is None else kit.data_uri(got.data, mime)
