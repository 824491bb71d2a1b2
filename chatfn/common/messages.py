"""Platform-neutral messages: what channels build, what the bot sends, and the stream events a
channel renders while a model answers.

Channels import this module and nothing of the tool loop or the providers, so a channel cannot
come to depend on how answers are produced.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

# The longest text a channel accepts from a user (HTTP refuses more, OneBot truncates): a
# message no model context can hold would fail that chat's every later turn.
MAX_TEXT_CHARS = 20000


def capped_text(text: str, platform: str, sender: str) -> str:
    """`text` cut to MAX_TEXT_CHARS with a note saying so (the model and the history see that
    it was cut), and a warning logged: what every chat channel does with an over-long message
    (HTTP refuses one instead)."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    from loguru import logger

    logger.warning(
        "{} message from {} is {} characters: kept the first {}",
        platform,
        sender,
        len(text),
        MAX_TEXT_CHARS,
    )
    return (
        text[:MAX_TEXT_CHARS]
        + f"\n[message truncated: it had {len(text)} characters, over the limit of "
        f"{MAX_TEXT_CHARS}]"
    )


def clean_text(text: str) -> str:
    """`text` with lone surrogates (valid JSON, invalid Unicode: no database or model API
    accepts them) replaced by U+FFFD, so the message is stored instead of dropped."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def surrogate_at(text: str) -> int | None:
    """The position of the first lone surrogate in `text` (valid JSON, invalid Unicode), or
    None when `text` is valid Unicode. Ids are refused with it rather than replaced: two
    different ids would become the same one (`clean_text` is for text only)."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        return exc.start


@dataclass(slots=True)
class IncomingMessage:
    """A platform-neutral chat message. Channels build these; nothing downstream knows the
    platform's own event shape."""

    platform: str
    chat_id: str
    sender_id: str
    text: str
    is_group: bool = False
    chat_name: str = ""
    sender_name: str = ""
    is_at_bot: bool = False
    quoted_text: str | None = None
    message_id: str = ""
    time: datetime = field(default_factory=lambda: datetime.now(UTC))
    # Set only by trusted local channels (the console's `:admin on`); network channels never do.
    admin_override: bool | None = None
    # Images the message carries (or quotes): `https://...` URLs or `data:image/...;base64,`
    # URIs. References only: the bytes are fetched (bounded) when a model needs them.
    images: list[str] = field(default_factory=list)
    # The sender's roles in this chat as the platform reports them ("owner", "admin"), set by
    # the channel from the platform's own event data (OneBot `sender.role`, Telegram chat
    # member status, ...), never from what the message says. `bot.trust_group_admins` lets a
    # group's owner and admins use the per-chat admin commands there.
    sender_roles: list[str] = field(default_factory=list)
    # Voice the message carries: `https://...` URLs or `data:audio/...;base64,` URIs, handed
    # on by the channel like images (the bot downloads, converts and transcribes them:
    # function_calls/voice.py). `transcript`: the platform's own transcript of it, when it
    # gives one (no speech-to-text call is made then). `spoken`: `text` is what was said (set
    # by the bot once transcribed; the history marks it with SPOKEN_MARK).
    audio: list[str] = field(default_factory=list)
    transcript: str | None = None
    spoken: bool = False
    # The platform marks the sender as a bot (Telegram from.is_bot, Discord author.bot, Slack
    # bot_id, KOOK author.bot, Feishu sender_type app): not answered unless the chat's
    # `answer_bots` allows it (README, "Loop guard").
    sender_is_bot: bool = False

    @property
    def display_name(self) -> str:
        return self.sender_name or self.sender_id

    def stored_text(self) -> str:
        """The text as the history stores it when the message comes in: with a note per image
        and per voice message (a transcript replaces the voice note once it is heard)."""
        if self.spoken:
            return SPOKEN_MARK + self.text
        notes = [self.text, self.image_notes()] if self.images else [self.text]
        notes += [f"[voice: {audio_label(ref)}]" for ref in self.audio]
        return "\n".join(n for n in notes if n).strip() if len(notes) > 1 else self.text

    def image_notes(self) -> str:
        """The references as they are stored in history: `[image: URL]` per image (a data URI
        is named by its type and size, never stored)."""
        return "\n".join(f"[image: {image_label(ref)}]" for ref in self.images)


#: How history marks a message whose text was spoken (a transcribed voice message); the model
#: is shown the words without it.
SPOKEN_MARK = "[voice] "


def audio_label(ref: str) -> str:
    """A voice reference as logs and notes name it (a data URI by its type and size)."""
    return image_label(ref)


#: The roles that make a sender a group's admin for `bot.trust_group_admins`.
GROUP_ADMIN_ROLES = frozenset({"owner", "admin"})


def image_label(ref: str) -> str:
    if ref.startswith("data:"):
        head, _, body = ref.partition(",")
        return f"{head[5:].split(';')[0] or 'image'}, {len(body) * 3 // 4} bytes inline"
    return ref[:500]


@dataclass(slots=True)
class OutgoingMessage:
    """A message the bot sends: a reply, a reminder, a welcome."""

    platform: str
    chat_id: str
    text: str
    is_group: bool = False
    at: str | None = None  # sender id to @-mention
    reply_to: str | None = None  # message id being answered, if any
    # The model's reasoning behind this reply: stored with it in history, never shown by
    # channels (they send `text` only).
    thinking: str | None = None
    # A notice from the bot itself (an outage, no model configured), not the model's words:
    # stored with role "notice" and left out of the conversation a model sees, so the model
    # never reads "Sorry, the model is not available" as something it said.
    notice: bool = False
    # Quote `reply_to` in the reply (a OneBot reply segment); set from the chat's
    # `reply_with_quote`, so channels need not know the per-chat rules.
    quote: bool = False
    # The outbox row of this message: its event id (SSE `id:`, `X-Chatfn-Event-Id`). Set by
    # the bot when the message is written to the outbox, before any channel sees it.
    event_id: int | None = None
    # Images sent with the text (a function's `FunctionResult.images`): `https://...` URLs or
    # `data:image/...;base64,` URIs; each channel sends them as its platform's image message
    # (with the last part of a split text). `text` may be empty when there are images.
    images: list[str] = field(default_factory=list)
    # The reply spoken (text to speech, `voice.tts`): `data:audio/...;base64,` URIs or URLs;
    # a channel that takes audio sends it as its platform's voice message beside the text.
    audio: list[str] = field(default_factory=list)
    # Buttons under the text, each (label, the text a press sends as the presser's message:
    # "/approve K3F9QX"): a channel with buttons (Telegram's inline keyboard) shows them, any
    # other ignores them, so the text must say the same (an approval request names its command).
    buttons: list[tuple[str, str]] = field(default_factory=list)


class NotDelivered(Exception):
    """Raised by a channel's `send` (or a reply sink) when a message cannot go out now but may
    later: no OneBot account online, no /v1/events subscriber. The outbox keeps it waiting.
    `rest` is the text still owed when the first parts of a split message did go out."""

    def __init__(self, reason: str, rest: str | None = None) -> None:
        super().__init__(reason)
        self.rest = rest


# What a channel raises is one of these five: it classifies a platform's failure, and the
# delivery policy (chatfn/runtime/delivery_policy.py) and the channel kit's connect loop
# (chatfn/channels/kit/) decide what follows. The three kinds of NotDelivered wait in the
# outbox like any NotDelivered; they say why, so the policy knows when to try again.


class RateLimited(NotDelivered):
    """The platform asked to slow down (HTTP 429, a flood-control code): try again after
    `retry_after` seconds, or, when the platform named no wait (None), after a backoff."""

    def __init__(
        self, reason: str, retry_after: float | None = None, rest: str | None = None
    ) -> None:
        super().__init__(reason, rest)
        self.retry_after = None if retry_after is None else max(0.0, float(retry_after))


class Unreachable(NotDelivered):
    """The platform could not be reached or failed the call (network, timeout, 5xx): try again
    with a backoff, or at once when the channel says its connection is back."""


class CredentialsRefused(NotDelivered):
    """The platform refused the bot's credentials (a dead or mistyped token). Its text is the
    one line the operator reads, naming the setting to fix; a channel retries slowly, since
    the credentials may be fixed while the bot runs."""


class DeliveryRefused(Exception):
    """The platform refused a message for good (e.g. the bot is muted): logged, marked failed
    in the outbox, never retried."""


@dataclass(slots=True)
class SystemEvent:
    """Something that happened in a chat that is not a message: a member joined, a friend
    request arrived. Channels build these; plugins subscribe with `Plugin.on_event`."""

    kind: str  # "member_joined" | "friend_request" | ...
    platform: str
    chat_id: str
    user_id: str
    user_name: str = ""
    is_group: bool = True
    data: dict[str, Any] = field(default_factory=dict)


def parse_arguments(text: str) -> dict[str, Any]:
    """A call's raw JSON arguments as a dict (empty text is `{}`); raises ValueError with a
    short reason the model can act on."""
    try:
        value = json.loads(text.strip() or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for.

    `arguments` stays the raw JSON text the model wrote, because a malformed call must go back to
    the model as an error it can fix, which needs the original text, not a parse of it.
    """

    id: str
    name: str
    arguments: str = "{}"
    # Opaque data a provider needs back verbatim on the next request (Gemini thought signatures).
    provider_data: dict[str, Any] | None = None

    def parsed_arguments(self) -> dict[str, Any]:
        """Strict parse; raises ValueError with a short reason the model can act on."""
        return parse_arguments(self.arguments)


StreamEventType = Literal[
    "text",  # a piece of visible text: `text`
    "thinking",  # a piece of reasoning: `text`
    "tool_call_start",  # `index`, `tool_call` (id and name known, arguments maybe not yet)
    "tool_call_delta",  # `index`, `text` (a fragment of the JSON arguments)
    "tool_call_end",  # `index`, `tool_call` (complete)
    "done",  # `response`: the assembled answer (providers.types.LLMResponse)
]

R = TypeVar("R")


@dataclass(slots=True)
class StreamEvent(Generic[R]):
    """One event of a streamed answer. A stream always ends with exactly one `done` event or
    raises a ProviderError; it never yields a half-parsed tool call as complete.

    Generic in the final response type so that channels, which render only text and call
    names, need not know the providers' response class."""

    type: StreamEventType
    text: str = ""
    index: int = 0
    tool_call: ToolCall | None = None
    response: R | None = None


Deliver = Callable[[OutgoingMessage], Awaitable[None]]
StreamObserver = Callable[[StreamEvent[Any]], Awaitable[None]]
