"""The incoming message, and the per-message context every handler receives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loguru import logger as _root_logger

if TYPE_CHECKING:
    from loguru import Logger

    from function_calls.registry import Registry
    from providers.base import ChatModel
    from providers.types import StreamEvent
    from runtime.settings import Settings
    from storage.db import Storage, StoredMessage


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

    @property
    def display_name(self) -> str:
        return self.sender_name or self.sender_id


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


@dataclass(slots=True)
class SystemEvent:
    """Something that happened in a chat that is not a message: a member joined, a friend
    request arrived. Channels build these; services (welcome) subscribe with Bot.on_event."""

    kind: str  # "member_joined" | "friend_request" | ...
    platform: str
    chat_id: str
    user_id: str
    user_name: str = ""
    is_group: bool = True
    data: dict[str, Any] = field(default_factory=dict)


Deliver = Callable[[OutgoingMessage], Awaitable[None]]
StreamObserver = Callable[["StreamEvent"], Awaitable[None]]


class MessageContext:
    """One per incoming message: who, where, whether the bot was addressed, and the services a
    handler may use. Handlers get everything they need from here, never from globals."""

    __slots__ = (
        "message",
        "is_admin",
        "config",
        "storage",
        "scheduler",
        "model",
        "logger",
        "sent",
        "_deliver",
        "extras",
        "stored_id",
        "registry",
        "on_stream",
    )

    def __init__(
        self,
        message: IncomingMessage,
        *,
        is_admin: bool,
        config: Settings,
        storage: Storage,
        deliver: Deliver,
        model: ChatModel | None = None,
        scheduler: Any = None,
        extras: dict[str, Any] | None = None,
        stored_id: int | None = None,
        registry: Registry | None = None,
        on_stream: StreamObserver | None = None,
    ) -> None:
        self.message = message
        self.is_admin = is_admin
        self.config = config
        self.storage = storage
        self.scheduler = scheduler
        self.model = model
        self._deliver = deliver
        self.sent: list[OutgoingMessage] = []
        self.extras: dict[str, Any] = extras or {}
        # Row id of this message in history: history() returns what came before it.
        self.stored_id = stored_id
        # The functions of this bot (the `help` built-in lists them).
        self.registry = registry
        # Set by channels that can show text as it arrives (console, HTTP streaming).
        self.on_stream = on_stream
        self.logger: Logger = _root_logger.bind(
            chat_id=message.chat_id, message_id=message.message_id, sender_id=message.sender_id
        )

    @property
    def is_group(self) -> bool:
        return self.message.is_group

    @property
    def text(self) -> str:
        return self.message.text

    async def reply(
        self, text: str, at: str | None = None, *, thinking: str | None = None, notice: bool = False
    ) -> None:
        """Send `text` to this chat (stored in history, delivered by the channel). `thinking`,
        the model reasoning that led to it, is stored with it and never sent."""
        out = OutgoingMessage(
            platform=self.message.platform,
            chat_id=self.message.chat_id,
            text=text,
            is_group=self.message.is_group,
            at=at if self.message.is_group else None,
            reply_to=self.message.message_id or None,
            thinking=thinking,
            notice=notice,
        )
        self.sent.append(out)
        await self._deliver(out)

    def history(self, limit: int = 20) -> list[StoredMessage]:
        """The chat's last `limit` stored messages before this one, oldest first."""
        return self.storage.recent_messages(
            self.message.platform, self.message.chat_id, limit, before_id=self.stored_id
        )
