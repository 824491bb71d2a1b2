"""The way out to Telegram: one ordered queue per chat, Markdown as MarkdownV2, long replies
split within 4096 UTF-16 code units, photos with sendPhoto, 429s waited out in place.

- Order, pace, 429s: the kit's (chatfn/channels/kit/sender.py): one queue per chat; a 429's
  `retry_after` is waited out in place up to `max_retry_after` (the delivery policy), longer
  the message waits in the outbox with the parts already sent left out.
- MarkdownV2 (chatfn/channels/markdown.py escapes every reserved character); should Telegram still
  refuse a part (400 "can't parse entities", a link's "wrong HTTP URL"), it is sent again as
  plain text (channels.markdown's to_plain), so no reply is lost to a formatting bug.
- Buttons (OutgoingMessage.buttons: an approval request's Approve/Deny): an inline keyboard
  under the last text part; a press comes back as a callback query (channel.py).
- Errors: a network error or a timeout raises NotDelivered (the outbox retries when polling
  works again); Forbidden (the bot was blocked or removed) and other refusals raise
  DeliveryRefused; a group that became a supergroup (ChatMigrated) is sent to its new id.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from loguru import logger
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from chatfn.channels import kit
from chatfn.channels.kit import media
from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.voice import unsent
from chatfn.channels.markdown import TelegramV2, to_plain, to_telegram_markdown_v2
from chatfn.channels.split import split_message, utf16_len
from chatfn.channels.telegram.parse import ChatRef, parse_chat_id
from chatfn.channels.telegram.settings import TelegramSettings
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy

T = TypeVar("T")
#: What a failed Bot API call is (kit.classify): BadRequest and RetryAfter come before.
ERRORS = ErrorKinds(
    "Telegram", "channels.telegram.token", (InvalidToken,), (TelegramError,), (NetworkError,)
)
CAPTION_LIMIT = 1024  # UTF-16 code units of a photo's caption (Bot API sendPhoto)

__all__ = ["CAPTION_LIMIT", "TelegramSender", "retry_seconds"]


def retry_seconds(exc: RetryAfter) -> float:
    """`retry_after` in seconds, whichever type this PTB version gives (int or timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value: Any = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class TelegramSender(kit.PlatformSender[ChatRef], platform="telegram", label="Telegram"):
    """Sends OutgoingMessages with a python-telegram-bot `Bot`."""

    def __init__(
        self, bot: Bot, settings: TelegramSettings, policy: DeliveryPolicy | None = None
    ) -> None:
        super().__init__(bot, settings, policy)
        self.bot = bot
        self.names: dict[str, str] = {}  # user id -> first name, for reply_with_mention
        self.migrated: dict[int, int] = {}  # group id -> its supergroup's id

    def split(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(
            text,
            limit or self.cfg.max_message_length,
            render=to_telegram_markdown_v2,
            measure=utf16_len,
        )

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, RetryAfter):
            wait = retry_seconds(exc)
            return kit.RateLimited(
                f"Telegram asks to wait {wait:.0f} s before sending to {key}", wait
            )
        if isinstance(exc, BadRequest):
            return None  # sent again as plain text (_formatted)
        return ERRORS.for_send(exc, key)  # Forbidden (blocked, removed) is refused for good

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        mention = ""
        if out.at and ref.is_group and out.at.lstrip("-").isdigit():
            label = TelegramV2().text(self.names.get(out.at, "you"))
            mention = f"[{label}](tg://user?id={out.at}) "
        limit = self.cfg.max_message_length - utf16_len(mention)
        parts = self.split(out.text, limit) if out.text.strip() else []
        images: list[str] = list(getattr(out, "images", None) or [])
        fits = lambda last: utf16_len(to_telegram_markdown_v2(last)) <= CAPTION_LIMIT  # noqa: E731
        caption = media.caption_from(parts, bool(images), fits)
        owed.parts = parts + ([caption] if caption is not None else [])
        reply_to = (
            int(out.reply_to) if out.quote and out.reply_to and out.reply_to.isdigit() else None
        )
        keyboard = _keyboard(out.buttons)
        for index, part in enumerate(parts):
            await self._text(
                ref,
                part,
                mention if index == 0 else "",
                reply_to if index == 0 else None,
                keyboard if index == len(parts) - 1 else None,
            )
            owed.sent += 1
        for index, image in enumerate(images):
            first = index == 0
            await self._image(
                ref,
                image,
                caption if first else None,
                mention if first and not parts else "",
                reply_to if first and not parts else None,
            )
            if first and caption is not None:
                owed.sent += 1
        for voice in getattr(out, "audio", None) or []:  # the reply spoken (voice.tts)
            await self._voice(ref, voice)

    # -- one platform call per part ------------------------------------------------------------
    async def _text(
        self,
        ref: ChatRef,
        part: str,
        mention: str,
        reply_to: int | None,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> None:
        async def send(chat: int, text: str | None, mode: ParseMode | None) -> Message:
            return await self.bot.send_message(
                chat,
                text or "",
                parse_mode=mode,
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
                reply_markup=keyboard,
            )

        await self._formatted(ref, send, mention + to_telegram_markdown_v2(part), to_plain(part))

    async def _image(
        self, ref: ChatRef, image: str, caption: str | None, mention: str, reply_to: int | None
    ) -> None:
        photo = kit.decode_image(image)

        async def send(chat: int, text: str | None, mode: ParseMode | None) -> Message:
            return await self.bot.send_photo(
                chat,
                photo,
                caption=text,
                parse_mode=mode if text else None,
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
            )

        rendered = mention + to_telegram_markdown_v2(caption) if caption else None
        await self._formatted(ref, send, rendered, to_plain(caption) if caption else None)

    async def _voice(self, ref: ChatRef, voice: str) -> None:
        """A spoken reply as a voice message (`sendVoice`, OGG/Opus), after its text: one
        that cannot be converted or is refused is logged, the text having gone."""
        with unsent(logger, "Telegram", ref.key, also=(TelegramError,)):
            data = await media.opus_voice(voice, "Telegram plays only uploaded voice")
            await self._call(
                ref,
                lambda chat: self.bot.send_voice(chat, data, message_thread_id=ref.thread_id),
            )

    async def _formatted(
        self,
        ref: ChatRef,
        send: Callable[[int, str | None, ParseMode | None], Awaitable[Message]],
        markdown: str | None,
        plain: str | None,
    ) -> None:
        """`send(chat, text, parse_mode)` with `markdown` as MarkdownV2, and again with
        `plain` as plain text should Telegram refuse it."""
        try:
            await self._call(ref, lambda chat: send(chat, markdown, ParseMode.MARKDOWN_V2))
        except BadRequest as exc:
            # "can't parse entities" (MarkdownV2 Telegram still refuses), "wrong HTTP URL" in a
            # link, ...: the same words as plain text, so a formatting bug loses no reply.
            logger.warning(
                "Telegram refused the MarkdownV2 of a message to {} ({}): sent as plain text",
                ref.key,
                exc,
            )
            try:
                await self._call(ref, lambda chat: send(chat, plain, None))
            except BadRequest as again:
                raise kit.DeliveryRefused(
                    f"Telegram refused the message to {ref.key}: {again}"
                ) from None

    async def _call(self, ref: ChatRef, call: Callable[[int], Awaitable[T]]) -> T:
        """One Bot API call to the chat (the kit's: paced, 429s waited out), a group that
        became a supergroup followed to its new id."""

        async def once() -> T:
            chat = self.migrated.get(ref.chat_id, ref.chat_id)
            try:
                return await call(chat)
            except ChatMigrated as exc:
                new = int(exc.new_chat_id)
                if new == chat:
                    raise kit.DeliveryRefused(f"{ref.key} migrated to itself?") from None
                logger.info("Telegram group {} is now supergroup {}: sending there", chat, new)
                self.migrated[ref.chat_id] = new
                return await call(new)

        return await self.call(ref.key, once)


def _keyboard(buttons: list[tuple[str, str]]) -> InlineKeyboardMarkup | None:
    """OutgoingMessage.buttons as one row of an inline keyboard: a press sends the button's
    text back as a callback query (channel.py makes it the presser's message). Telegram takes
    at most 64 bytes of callback data: a longer text gets no button (the message says it)."""
    row = [
        InlineKeyboardButton(label, callback_data=data)
        for label, data in buttons
        if len(data.encode()) <= 64
    ]
    return InlineKeyboardMarkup([row]) if row else None


def _reply(message_id: int | None) -> ReplyParameters | None:
    if message_id is None:
        return None
    # The answered message may be gone by now: the reply is still sent, without the quote.
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)
