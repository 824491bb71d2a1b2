"""The way out to Telegram: one ordered queue per chat, Markdown as MarkdownV2, long replies
split within 4096 UTF-16 code units, photos with sendPhoto, 429s waited out in place.

- Order: every send to a chat (a reply's parts, its photos, a reminder that fires meanwhile)
  runs in one queue per chat (chatfn/channels/outbound.py's OrderedRunner), so a 429 on one part
  holds back the parts after it instead of letting them overtake it.
- 429 (`RetryAfter`: the Bot API's `parameters.retry_after`): the same call is made again
  after that many seconds, up to `max_retry_after`; longer, the message stays in the outbox
  (NotDelivered) with the parts already sent left out.
- MarkdownV2 (chatfn/channels/markdown.py escapes every reserved character); should Telegram still
  refuse a part (400 "can't parse entities", a link's "wrong HTTP URL"), it is sent again as
  plain text (channels.markdown's to_plain), so no reply is lost to a formatting bug.
- Errors: a network error or a timeout raises NotDelivered (the outbox retries when polling
  works again); Forbidden (the bot was blocked or removed) and other refusals raise
  DeliveryRefused; a group that became a supergroup (ChatMigrated) is sent to its new id.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from loguru import logger
from telegram import Bot, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from chatfn.channels.markdown import TelegramV2, to_plain, to_telegram_markdown_v2
from chatfn.channels.outbound import OrderedRunner, RateLimiter
from chatfn.channels.split import split_message, utf16_len
from chatfn.channels.telegram.parse import ChatRef, parse_chat_id
from chatfn.channels.telegram.settings import TelegramSettings
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage

T = TypeVar("T")
CAPTION_LIMIT = 1024  # UTF-16 code units of a photo's caption (Bot API sendPhoto)

__all__ = ["CAPTION_LIMIT", "TelegramSender", "retry_seconds"]


def retry_seconds(exc: RetryAfter) -> float:
    """`retry_after` in seconds, whichever type this PTB version gives (int or timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value: Any = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _photo(ref: str) -> bytes | str:
    """A data URI as its bytes; an http(s) URL as it is (Telegram fetches it)."""
    if ref.startswith("data:"):
        head, _, body = ref.partition(",")
        if ";base64" not in head:
            raise DeliveryRefused(f"image {head[:40]!r} is not base64")
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise DeliveryRefused("image data URI is not valid base64") from None
    if ref.startswith(("http://", "https://")):
        return ref
    raise DeliveryRefused(f"image reference {ref[:40]!r} is neither a data URI nor a URL")


class _Progress:
    """What of one message went out: the parts sent, for NotDelivered's `rest`."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.sent = 0

    def rest(self) -> str | None:
        return "\n\n".join(self.parts[self.sent :]) if self.sent else None


class TelegramSender:
    """Sends OutgoingMessages with a python-telegram-bot `Bot`."""

    def __init__(self, bot: Bot, settings: TelegramSettings) -> None:
        self.bot = bot
        self.cfg = settings
        self.runner = OrderedRunner()
        self.limiter = RateLimiter(settings.send_rate, settings.send_burst)
        self.names: dict[str, str] = {}  # user id -> first name, for reply_with_mention
        self.migrated: dict[int, int] = {}  # group id -> its supergroup's id
        self.on_sent: Callable[[ChatRef, Message], None] | None = None
        # Called with a 429's wait when the message is left in the outbox (the channel kicks
        # the outbox once that time has passed).
        self.retry_later: Callable[[float], None] | None = None

    def split(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(
            text,
            limit or self.cfg.max_message_length,
            render=to_telegram_markdown_v2,
            measure=utf16_len,
        )

    async def deliver(self, out: OutgoingMessage) -> None:
        try:
            ref = parse_chat_id(out.chat_id)
        except ValueError as exc:
            raise DeliveryRefused(str(exc)) from None
        await self.runner.submit(ref.key, lambda: self._deliver(ref, out))

    async def _deliver(self, ref: ChatRef, out: OutgoingMessage) -> None:
        mention = ""
        if out.at and ref.is_group and out.at.lstrip("-").isdigit():
            label = TelegramV2().text(self.names.get(out.at, "you"))
            mention = f"[{label}](tg://user?id={out.at}) "
        limit = self.cfg.max_message_length - utf16_len(mention)
        parts = self.split(out.text, limit) if out.text.strip() else []
        images: list[str] = list(getattr(out, "images", None) or [])
        caption: str | None = None
        if images and parts and utf16_len(to_telegram_markdown_v2(parts[-1])) <= CAPTION_LIMIT:
            caption = parts.pop()
        progress = _Progress(parts + ([caption] if caption is not None else []))
        reply_to = (
            int(out.reply_to) if out.quote and out.reply_to and out.reply_to.isdigit() else None
        )
        try:
            for index, part in enumerate(parts):
                await self._text(
                    ref, part, mention if index == 0 else "", reply_to if index == 0 else None
                )
                progress.sent += 1
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
                    progress.sent += 1
        except NotDelivered as exc:  # a 429 longer than max_retry_after
            raise NotDelivered(str(exc), rest=progress.rest()) from None
        except (NetworkError, InvalidToken) as exc:
            if isinstance(exc, BadRequest | Forbidden | ChatMigrated):
                raise
            raise NotDelivered(f"Telegram not reachable ({exc})", rest=progress.rest()) from None

    # -- one platform call per part ------------------------------------------------------------
    async def _text(self, ref: ChatRef, part: str, mention: str, reply_to: int | None) -> None:
        rendered = mention + to_telegram_markdown_v2(part)

        async def markdown(chat: int) -> Message:
            return await self.bot.send_message(
                chat,
                rendered,
                parse_mode=ParseMode.MARKDOWN_V2,
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
            )

        async def plain(chat: int) -> Message:
            return await self.bot.send_message(
                chat,
                to_plain(part),
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
            )

        await self._formatted(ref, markdown, plain)

    async def _image(
        self, ref: ChatRef, image: str, caption: str | None, mention: str, reply_to: int | None
    ) -> None:
        photo = _photo(image)

        async def markdown(chat: int) -> Message:
            return await self.bot.send_photo(
                chat,
                photo,
                caption=mention + to_telegram_markdown_v2(caption) if caption else None,
                parse_mode=ParseMode.MARKDOWN_V2 if caption else None,
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
            )

        async def plain(chat: int) -> Message:
            return await self.bot.send_photo(
                chat,
                photo,
                caption=to_plain(caption) if caption else None,
                message_thread_id=ref.thread_id,
                reply_parameters=_reply(reply_to),
            )

        await self._formatted(ref, markdown, plain)

    async def _formatted(
        self,
        ref: ChatRef,
        markdown: Callable[[int], Awaitable[Message]],
        plain: Callable[[int], Awaitable[Message]],
    ) -> None:
        try:
            sent = await self._call(ref, markdown)
        except BadRequest as exc:
            # "can't parse entities" (MarkdownV2 Telegram still refuses), "wrong HTTP URL" in a
            # link, ...: the same words as plain text, so a formatting bug loses no reply.
            logger.warning(
                "Telegram refused the MarkdownV2 of a message to {} ({}): sent as plain text",
                ref.key,
                exc,
            )
            try:
                sent = await self._call(ref, plain)
            except BadRequest as again:
                raise DeliveryRefused(
                    f"Telegram refused the message to {ref.key}: {again}"
                ) from None
        if self.on_sent is not None:
            self.on_sent(ref, sent)

    async def _call(self, ref: ChatRef, call: Callable[[int], Awaitable[T]]) -> T:
        """One Bot API call to the chat: paced, 429s waited out, a migrated group followed."""
        chat = self.migrated.get(ref.chat_id, ref.chat_id)
        while True:
            await self.limiter.acquire(ref.key)
            try:
                return await call(chat)
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                if wait > self.cfg.max_retry_after:
                    if self.retry_later is not None:  # the outbox tries again when allowed
                        self.retry_later(wait)
                    raise NotDelivered(
                        f"Telegram asks to wait {wait:.0f} s before sending to {ref.key}"
                    ) from None
                logger.warning("Telegram flood control on {}: retrying in {:.1f} s", ref.key, wait)
                await asyncio.sleep(wait)
            except ChatMigrated as exc:
                new = int(exc.new_chat_id)
                if new == chat:
                    raise DeliveryRefused(f"{ref.key} migrated to itself?") from None
                logger.info("Telegram group {} is now supergroup {}: sending there", chat, new)
                self.migrated[ref.chat_id] = chat = new
            except Forbidden as exc:
                raise DeliveryRefused(f"Telegram refused the message to {ref.key}: {exc}") from None
            except (BadRequest, NetworkError, InvalidToken):
                raise
            except TelegramError as exc:
                raise DeliveryRefused(f"Telegram refused the message to {ref.key}: {exc}") from None


def _reply(message_id: int | None) -> ReplyParameters | None:
    if message_id is None:
        return None
    # The answered message may be gone by now: the reply is still sent, without the quote.
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)
