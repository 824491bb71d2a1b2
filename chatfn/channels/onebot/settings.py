"""`channels.onebot:`: the OneBot v11 channel's settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from chatfn.common.config import DEPRECATED, Section


class OneBotSettings(Section):
    """OneBot v11 reverse WebSocket: the implementation (NapCat, LLOneBot, Lagrange) connects to
    ws://host:port/onebot/v11/ws."""

    # The address the reverse WebSocket listens on (0.0.0.0 when the implementation runs on
    # another machine or in a container).
    host: str = "127.0.0.1"
    # Its port.
    port: int = Field(default=8081, ge=0, le=65535)
    # When set, a connection must present it (Authorization: Bearer, or ?access_token=).
    access_token: str | None = None
    # Friend requests: accept them (set_friend_add_request) or leave them pending.
    friend_requests: Literal["approve", "ignore"] = "ignore"
    # Longer replies are split on line boundaries into parts of at most this many characters.
    max_message_length: int = Field(default=3000, ge=50)
    # Per chat: messages per second after a burst of `send_burst`; 0 disables the limit.
    send_rate: float = Field(default=1.0, ge=0)
    # Per chat: messages sent at once before `send_rate` paces them.
    send_burst: int = Field(default=3, ge=1)
    # Seconds to wait for the answer to one action (send_group_msg, get_msg, ...).
    action_timeout: float = Field(default=10.0, gt=0)
    # Seconds a send waits for a bot account whose connection dropped to come back.
    reconnect_wait: float = Field(default=10.0, ge=0)
    # Superseded by the outbox (storage.outbox: messages owed to an offline account survive
    # a restart and wait up to storage.outbox.max_wait); still accepted, no longer used.
    resend_queue: int = Field(default=100, ge=0, json_schema_extra=DEPRECATED)
    # Superseded by `storage.outbox.max_wait`; still accepted, no longer used.
    resend_max_age: float = Field(default=600.0, gt=0, json_schema_extra=DEPRECATED)
    # Deprecated: `bot.reply_with_quote` (or `reply_with_quote` in a `chats:` rule).
    quote_replies: bool = Field(default=False, json_schema_extra=DEPRECATED)

    @field_validator("access_token")
    @classmethod
    def _empty_token_is_none(cls, v: str | None) -> str | None:
        return v or None
