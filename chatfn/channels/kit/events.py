"""One name per system event, and the event every platform builds the same way.

Plugins subscribe by these names (`Plugin.on_event(MEMBER_JOINED)`); a channel builds the event
with `member_joined` rather than spelling the kind and the fields again.
"""

from __future__ import annotations

from typing import Any

from chatfn.common.messages import SystemEvent, clean_text

__all__ = ["FRIEND_REQUEST", "MEMBER_JOINED", "friend_request", "member_joined"]

#: Someone joined a group chat (the welcome built-in answers it).
MEMBER_JOINED = "member_joined"
#: Someone asked to be the bot's friend; `data["approved"]` says what was done.
FRIEND_REQUEST = "friend_request"


def member_joined(platform: str, chat_id: str, user_id: str, name: str, **data: Any) -> SystemEvent:
    """`user_id` (shown as `name`) joined the group `chat_id`; `data` as the platform gives it
    (`added_by`, a guild id, ...)."""
    return SystemEvent(
        kind=MEMBER_JOINED,
        platform=platform,
        chat_id=chat_id,
        user_id=user_id,
        user_name=clean_text(name),
        is_group=True,
        data=data,
    )


def friend_request(
    platform: str, chat_id: str, user_id: str, approved: bool, **data: Any
) -> SystemEvent:
    """`user_id` asked to be the bot's friend (their private chat `chat_id`); `approved`: what
    was done about it."""
    return SystemEvent(
        kind=FRIEND_REQUEST,
        platform=platform,
        chat_id=chat_id,
        user_id=user_id,
        user_name=user_id,
        is_group=False,
        data={**data, "approved": approved},
    )
