"""The way out to Slack: one ordered queue per chat, Markdown as mrkdwn, long replies split
within `max_message_length`, images uploaded, 429s waited out in place.

- Order, pace, 429s: the kit's (chatfn/channels/kit/sender.py). A 429 (`ratelimited`,
  https://api.slack.com/apis/rate-limits) is waited out for its `Retry-After` up to
  `max_retry_after` (the delivery policy); longer, the message waits in the outbox with the
  parts already sent left out.
- mrkdwn (chatfn/channels/markdown.py's to_slack_mrkdwn escapes `&`, `<` and `>`); the bot's own
  mention of a user is `<@U...>`.
- Threads: a chat id with `:thread:<ts>` posts into that thread; with `reply_with_quote` a
  top-level message is answered in a thread under it (Slack has no quoted replies).
- Images: a data URI is uploaded with files_upload_v2 (files.getUploadURLExternal, the upload,
  files.completeUploadExternal) with the reply's last part as its comment; an https URL is an
  image block.
- Buttons (OutgoingMessage.buttons: an approval request's Approve / Deny): the last text part
  goes as Block Kit, a `section` with its mrkdwn and an `actions` block of `button`s whose
  `value` is the text a press sends; the press comes back as a `block_actions` interaction
  (channel.py). A part too long for a section (3000 characters) is sent as text and the
  buttons follow in a message of their own.
- Errors: network trouble and a refused token (`invalid_auth`, `token_revoked`: fixable) raise
  NotDelivered (the outbox retries); other refusals (`channel_not_found`, `not_in_channel`,
  `is_archived`, ...) raise DeliveryRefused.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chatfn.channels import kit
from chatfn.channels.kit import media, rest
from chatfn.channels.markdown import to_slack_mrkdwn
from chatfn.channels.slack.parse import _ID, _TS, ChatRef, parse_chat_id
from chatfn.channels.slack.settings import SlackSettings
from chatfn.channels.split import split_message
from chatfn.common.messages import OutgoingMessage

__all__ = ["AUTH_ERRORS", "SlackSender", "retry_after"]

#: Web API errors of a token that no longer works (fixable: the message waits).
AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
COMMENT_LIMIT = 4000  # an upload's initial_comment, kept within one message's advised size
# Block Kit's limits (https://api.slack.com/reference/block-kit/block-elements#button): a
# section's text, a button's label and value, an actions block's elements.
SECTION_LIMIT, LABEL_LIMIT, VALUE_LIMIT, ACTIONS_LIMIT = 3000, 75, 2000, 25
BUTTON_ACTION = "chatfn_button"  # action_id prefix: a press of one of the bot's own buttons


def retry_after(exc: SlackApiError) -> float | None:
    """The seconds a 429 asks to wait (its Retry-After header, else 1), or None if not a 429."""
    response = exc.response
    if getattr(response, "status_code", None) != 429:
        return None
    wait = rest.retry_after(getattr(response, "headers", None))
    return 1.0 if wait is None else wait


def error_code(exc: SlackApiError) -> str:
    data: Any = getattr(exc.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def token_refused(
    exc: SlackApiError, setting: str, fix: str = "", call: str = ""
) -> kit.CredentialsRefused | None:
    """The token `setting` refused (an error of AUTH_ERRORS) as the operator's one line, the
    error after `call` and ending with what to check (`fix`); None for any other error."""
    code = error_code(exc)
    if code not in AUTH_ERRORS:
        return None
    said = f"Slack refused channels.slack.{setting} ({f'{call}: ' if call else ''}{code})"
    return kit.CredentialsRefused(f"{said}: {fix}" if fix else said)


class SlackSender(kit.PlatformSender[ChatRef], platform="slack", label="Slack"):
    """Sends OutgoingMessages with slack_sdk's AsyncWebClient (`client`)."""

    client: AsyncWebClient
    cfg: SlackSettings

    def split(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(text, limit or self.cfg.max_message_length, render=to_slack_mrkdwn)

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, aiohttp.ClientError | TimeoutError):
            return kit.Unreachable(f"Slack not reachable ({exc})")
        if not isinstance(exc, SlackApiError):
            return None
        wait = retry_after(exc)
        if wait is not None:
            return kit.RateLimited(f"Slack asks to wait {wait:.0f} s before sending to {key}", wait)
        refused = token_refused(exc, "bot_token")
        return refused or kit.DeliveryRefused(
            f"Slack refused the message to {key}: {error_code(exc) or exc}"
        )

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        mention = f"<@{out.at}> " if out.at and ref.is_group and _ID.match(out.at) else ""
        thread = ref.thread
        if thread is None and out.quote and out.reply_to and _TS.match(out.reply_to):
            thread = out.reply_to  # Slack's way to answer one message: a thread under it
        post = functools.partial(self._post, ref, thread)
        limit = self.cfg.max_message_length - len(mention)
        parts = self.split(out.text, limit) if out.text.strip() else []
        images = [kit.decode_image(i) for i in out.images]
        uploads = any(isinstance(i, bytes) for i in images)
        fits = lambda last: len(to_slack_mrkdwn(last)) <= COMMENT_LIMIT  # noqa: E731
        caption = media.caption_from(parts, uploads, fits)
        owed.parts = parts + ([caption] if caption is not None else [])
        actions = button_block(out.buttons)
        for index, part in enumerate(parts):
            text = (mention if index == 0 else "") + to_slack_mrkdwn(part)
            last = actions is not None and index == len(parts) - 1
            blocks = [section(text), actions] if last and len(text) <= SECTION_LIMIT else None
            await post(self.client.chat_postMessage, text=text, mrkdwn=True, blocks=blocks)
            owed.sent += 1
            if last and blocks is None and actions:  # a long part: the buttons on their own
                labels = " / ".join(label for label, _ in out.buttons)
                await post(self.client.chat_postMessage, text=labels, blocks=[actions])
        first = not parts
        for image in images:
            if isinstance(image, bytes):
                comment = to_slack_mrkdwn(caption) if caption is not None else ""
                text = (mention if first else "") + comment
                name = kit.image_name(image)
                await post(
                    self.client.files_upload_v2,
                    content=image,
                    filename=name,
                    initial_comment=text or None,
                )
                if caption is not None:
                    owed.sent, caption = owed.sent + 1, None
            else:
                block = {"type": "image", "image_url": image, "alt_text": "image"}
                text = (mention if first else "") or "image"
                await post(self.client.chat_postMessage, text=text, blocks=[block])
            first = False
        for name, _mime, data in media.spoken_files(out.audio):  # the reply spoken: a file
            await post(self.client.files_upload_v2, content=data, filename=name)

    async def _post(
        self, ref: ChatRef, thread: str | None, method: Callable[..., Awaitable[Any]], **fields: Any
    ) -> Any:
        """One Web API call (`method` of the client) to the chat, in `thread`, through the
        kit's `call` (paced, classified, a 429 waited out)."""
        return await self.call(
            ref.key, functools.partial(method, channel=ref.target, thread_ts=thread, **fields)
        )


def section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}}


def button_block(buttons: list[tuple[str, str]]) -> dict[str, Any] | None:
    """OutgoingMessage.buttons as an `actions` block: a press sends the button's `value` back
    (channel.py makes it the presser's message). A value over Slack's 2000 characters gets no
    button (the message's text says the command anyway)."""
    elements = [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": label[:LABEL_LIMIT] or "?"},
            "value": value,
            "action_id": f"{BUTTON_ACTION}_{index}",
        }
        for index, (label, value) in enumerate(buttons[:ACTIONS_LIMIT])
        if value and len(value) <= VALUE_LIMIT
    ]
    return {"type": "actions", "elements": elements} if elements else None
