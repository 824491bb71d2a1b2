"""The way out to Slack: one ordered queue per chat, Markdown as mrkdwn, long replies split
within `max_message_length`, images uploaded, 429s waited out in place.

- Order: every send to a chat (a reply's parts, its images, a reminder that fires meanwhile)
  runs in one queue per chat (chatfn/channels/outbound.py's OrderedRunner), so a 429 on one part
  holds back the parts after it instead of letting them overtake it.
- 429 (`ratelimited`, https://api.slack.com/apis/rate-limits): the same call is made again
  after the `Retry-After` header's seconds, up to `max_retry_after`; longer, the message stays
  in the outbox (NotDelivered) with the parts already sent left out.
- mrkdwn (chatfn/channels/markdown.py's to_slack_mrkdwn escapes `&`, `<` and `>`); the bot's own
  mention of a user is `<@U...>`.
- Threads: a chat id with `:thread:<ts>` posts into that thread; with `reply_with_quote` a
  top-level message is answered in a thread under it (Slack has no quoted replies).
- Images: a data URI is uploaded with files_upload_v2 (files.getUploadURLExternal, the upload,
  files.completeUploadExternal) with the reply's last part as its comment; an https URL is an
  image block.
- Errors: network trouble and a refused token (`invalid_auth`, `token_revoked`: fixable) raise
  NotDelivered (the outbox retries); other refusals (`channel_not_found`, `not_in_channel`,
  `is_archived`, ...) raise DeliveryRefused.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from loguru import logger
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chatfn.channels.markdown import to_slack_mrkdwn
from chatfn.channels.outbound import OrderedRunner, RateLimiter
from chatfn.channels.slack.parse import _ID, _TS, ChatRef, parse_chat_id
from chatfn.channels.slack.settings import SlackSettings
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage

__all__ = ["AUTH_ERRORS", "SlackSender", "retry_after"]

#: Web API errors of a token that no longer works (fixable: the message waits).
AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
COMMENT_LIMIT = 4000  # an upload's initial_comment, kept within one message's advised size


def retry_after(exc: SlackApiError) -> float | None:
    """The seconds a 429 asks to wait (its Retry-After header), or None if not a 429."""
    response = exc.response
    if getattr(response, "status_code", None) != 429:
        return None
    headers: Any = getattr(response, "headers", {}) or {}
    raw = next((v for k, v in dict(headers).items() if k.lower() == "retry-after"), None)
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else 1.0
    except ValueError:
        return 1.0


def error_code(exc: SlackApiError) -> str:
    data: Any = getattr(exc.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def _image(ref: str) -> bytes | str:
    """A data URI as its bytes; an http(s) URL as it is (an image block: Slack fetches it)."""
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


def _filename(data: bytes) -> str:
    if data.startswith(b"\x89PNG"):
        return "image.png"
    if data.startswith(b"GIF8"):
        return "image.gif"
    if data[8:12] == b"WEBP":
        return "image.webp"
    return "image.jpg"


class SlackSender:
    """Sends OutgoingMessages with slack_sdk's AsyncWebClient."""

    def __init__(self, client: AsyncWebClient, settings: SlackSettings) -> None:
        self.client = client
        self.cfg = settings
        self.runner = OrderedRunner()
        self.limiter = RateLimiter(settings.send_rate, settings.send_burst)
        self._told_auth = False

    def split(self, text: str, limit: int | None = None) -> list[str]:
        from chatfn.channels.split import split_message

        return split_message(text, limit or self.cfg.max_message_length, render=to_slack_mrkdwn)

    async def deliver(self, out: OutgoingMessage) -> None:
        try:
            ref = parse_chat_id(out.chat_id)
        except ValueError as exc:
            raise DeliveryRefused(str(exc)) from None
        await self.runner.submit(ref.key, lambda: self._deliver(ref, out))

    async def _deliver(self, ref: ChatRef, out: OutgoingMessage) -> None:
        mention = f"<@{out.at}> " if out.at and ref.is_group and _ID.match(out.at) else ""
        thread = ref.thread_ts
        if thread is None and out.quote and out.reply_to and _TS.match(out.reply_to):
            thread = out.reply_to  # Slack's way to answer one message: a thread under it
        limit = self.cfg.max_message_length - len(mention)
        parts = self.split(out.text, limit) if out.text.strip() else []
        images = [_image(i) for i in out.images]
        caption: str | None = None
        uploads = [i for i in images if isinstance(i, bytes)]
        if uploads and parts and len(to_slack_mrkdwn(parts[-1])) <= COMMENT_LIMIT:
            caption = parts.pop()
        sent = 0
        owed = parts + ([caption] if caption is not None else [])
        try:
            for index, part in enumerate(parts):
                text = (mention if index == 0 else "") + to_slack_mrkdwn(part)
                await self._call(
                    ref,
                    lambda text=text: self.client.chat_postMessage(  # type: ignore[misc]
                        channel=ref.channel, text=text, thread_ts=thread, mrkdwn=True
                    ),
                )
                sent += 1
            first = not parts
            for image in images:
                if isinstance(image, bytes):
                    comment = to_slack_mrkdwn(caption) if caption is not None else ""
                    text = (mention if first else "") + comment
                    await self._call(
                        ref,
                        lambda image=image, text=text: self.client.files_upload_v2(
                            channel=ref.channel,
                            content=image,
                            filename=_filename(image),
                            initial_comment=text or None,
                            thread_ts=thread,
                        ),
                    )
                    if caption is not None:
                        sent, caption = sent + 1, None
                else:
                    block = {"type": "image", "image_url": image, "alt_text": "image"}
                    await self._call(
                        ref,
                        lambda block=block, text=(mention if first else "") or "image": (
                            self.client.chat_postMessage(
                                channel=ref.channel,
                                text=text,
                                blocks=[block],
                                thread_ts=thread,
                            )
                        ),
                    )
                first = False
        except (aiohttp.ClientError, TimeoutError) as exc:
            rest = "\n\n".join(owed[sent:]) if sent else None
            raise NotDelivered(f"Slack not reachable ({exc})", rest=rest) from None
        except NotDelivered as exc:
            if sent and exc.rest is None:
                raise NotDelivered(str(exc), rest="\n\n".join(owed[sent:])) from None
            raise

    async def _call(self, ref: ChatRef, call: Callable[[], Awaitable[Any]]) -> Any:
        """One Web API call for the chat: paced, 429s waited out in place."""
        while True:
            await self.limiter.acquire(ref.key)
            try:
                result = await call()
                self._told_auth = False
                return result
            except SlackApiError as exc:
                wait = retry_after(exc)
                if wait is not None:
                    if wait > self.cfg.max_retry_after:
                        raise NotDelivered(
                            f"Slack asks to wait {wait:.0f} s before sending to {ref.key}"
                        ) from None
                    logger.warning("Slack rate limit on {}: retrying in {:.1f} s", ref.key, wait)
                    await asyncio.sleep(wait)
                    continue
                code = error_code(exc)
                if code in AUTH_ERRORS:
                    if not self._told_auth:
                        logger.error(
                            "Slack refused channels.slack.bot_token ({}): messages wait in "
                            "the outbox until the token works",
                            code,
                        )
                    self._told_auth = True
                    raise NotDelivered(f"Slack refused the bot token ({code})") from None
                raise DeliveryRefused(
                    f"Slack refused the message to {ref.key}: {code or exc}"
                ) from None
