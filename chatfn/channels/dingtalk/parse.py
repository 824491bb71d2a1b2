"""DingTalk chat ids, and what a robot message says once read.

Chat ids (what `chats:` rules match): `group:<openConversationId>` for a group (DingTalk's
`conversationId` of the message, `cid...`, which is the group send API's
`openConversationId`) and `private:<staffId>` for a one-to-one chat (the one-to-one send API
addresses users by their staff id, `userIds`). Senders (`sender_id`, `bot.admins`) are staff
ids (`senderStaffId`; `senderId`, the encrypted DingTalk id, for a sender outside the org).

A robot message (https://open.dingtalk.com/document/orgapp/receive-message), read through the
official SDK's `ChatbotMessage`: `msgtype` text ({"text": {"content"}}), picture
({"content": {"downloadCode"}}) or richText ({"content": {"richText": [{"text"} |
{"downloadCode", "type": "picture"}]}}) or audio ({"content": {"downloadCode", "duration",
"recognition"}}: DingTalk's own transcript); `isInAtList` says the robot was @-mentioned (its
mention is already cut out of the text by DingTalk; a group sends the robot only such
messages unless it may read every message), `atUsers` the ids mentioned (the robot's own,
`chatbotUserId`, is a mention too), `isAdmin` that the sender is an admin, `sessionWebhook`
+ `sessionWebhookExpiredTime` where to answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chatfn.channels import kit

__all__ = ["ChatRef", "Read", "parse_chat_id", "read_message"]

_GROUP = re.compile(r"^cid[A-Za-z0-9+/=_\-]{1,128}$")
_USER = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_NEVER = re.compile(r"(?!)")


#: Where a message goes: a group's openConversationId or a user's staff id.
ChatRef = kit.ChatTarget


def parse_chat_id(chat_id: str) -> ChatRef:
    """A chat id back to where to send; ValueError naming the expected shape."""
    shapes = "private:<staffId> or group:cid..."
    pattern = _GROUP if chat_id.startswith("group:") else _USER
    is_group, target, _thread = kit.chat_parts(chat_id, pattern, _NEVER, "DingTalk", shapes)
    return ChatRef(is_group, target)


@dataclass(slots=True)
class Read:
    """What one robot message says, and who and where it is."""

    chat: ChatRef | None
    sender: str
    sender_name: str
    text: str
    mentioned: bool
    is_admin: bool
    message_id: str
    created: Any
    download_codes: list[str] = field(default_factory=list)
    # A voice message: DingTalk's transcript of it (`recognition`), and its file's code.
    transcript: str | None = None
    audio_code: str = ""
    webhook: str = ""
    webhook_expires: int = 0  # ms since the epoch


def read_message(data: dict[str, Any]) -> Read:
    """A robot message's JSON (the Stream frame's `data`, the callback's body)."""
    from dingtalk_stream import ChatbotMessage

    msg = ChatbotMessage.from_dict(data)
    group = str(msg.conversation_type or "") == "2"
    sender = str(msg.sender_staff_id or msg.sender_id or "")
    if group:
        conversation = str(msg.conversation_id or "")
        chat = ChatRef(True, conversation) if _GROUP.match(conversation) else None
    else:
        chat = ChatRef(False, sender) if _USER.match(sender) else None
    texts = [t for t in (msg.get_text_list() or []) if isinstance(t, str)]
    codes = [c for c in (msg.get_image_list() or []) if isinstance(c, str) and c]
    transcript, audio_code = None, ""
    if data.get("msgtype") == "audio" and isinstance(data.get("content"), dict):
        content = data["content"]
        transcript = str(content.get("recognition") or "").strip() or None
        audio_code = str(content.get("downloadCode") or "")
    return Read(
        chat=chat,
        sender=sender,
        sender_name=str(msg.sender_nick or ""),
        text="\n".join(texts).strip(),
        mentioned=bool(msg.is_in_at_list) or _bot_in(msg.at_users, msg.chatbot_user_id),
        is_admin=bool(msg.is_admin),
        message_id=str(msg.message_id or ""),
        created=msg.create_at,
        download_codes=codes,
        transcript=transcript,
        audio_code=audio_code,
        webhook=str(msg.session_webhook or ""),
        webhook_expires=int(msg.session_webhook_expired_time or 0),
    )


def _bot_in(at_users: Any, bot: Any) -> bool:
    """Whether `atUsers` names the robot (`chatbotUserId`): a mention where `isInAtList`
    is missing."""
    return bool(bot) and any(getattr(u, "dingtalk_id", None) == bot for u in at_users or [])
