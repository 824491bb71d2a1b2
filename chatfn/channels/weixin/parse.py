"""Chat ids and what comes in, for iLink's `WeixinMessage` (openclaw-weixin
src/api/types.ts and docs/protocol.md "Message model").

- A message with a `group_id` is of the group `group:<group_id>`, else of the private chat
  `private:<from_user_id>` (ids look like `...@im.wechat`). The peers (OpenClaw, AstrBot,
  Hermes Agent) see private chats only and say iLink rarely delivers ordinary groups to a
  bot; the group case follows the message model's `group_id` as delivered.
- `item_list`: text (type 1), image (2, on the CDN: media.py), voice (3: its `text`, iLink's
  transcript, is the message's transcript; without one its SILK on the CDN goes to
  voice.stt); file and video are named, not fetched. A text item's
  `ref_msg` is the message quoted (its `title` and item).
- `message_type` 2 is a bot's own message (not taken); `context_token` must be given back
  with every reply to the chat (channel.py keeps the newest per chat).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit import chat_parts

__all__ = ["ChatRef", "Parsed", "parse_chat_id", "parse_message"]

_ID = re.compile(r"^[A-Za-z0-9@._\-]{1,120}$")
_NO_THREAD = re.compile(r"^$")
TEXT, IMAGE, VOICE, FILE, VIDEO = 1, 2, 3, 4, 5
BOT_MESSAGE = 2


#: Where a reply goes: the user (private) or the group.
ChatRef = kit.ChatTarget


def parse_chat_id(chat_id: str) -> ChatRef:
    is_group, target, _ = chat_parts(
        chat_id, _ID, _NO_THREAD, "WeChat", "private:<user id> or group:<group id>"
    )
    return ChatRef(is_group, target)


@dataclass(slots=True)
class Parsed:
    """One user message: its chat, sender, text, quote and media items to fetch."""

    chat: ChatRef
    sender: str
    message_id: str
    text: str
    quoted: str | None
    images: list[dict[str, Any]] = field(default_factory=list)  # image items
    # A voice: iLink's transcript (`voice_item.text`) when it made one, else the voice items
    # themselves (SILK on the CDN) for voice.stt.
    transcript: str | None = None
    voices: list[dict[str, Any]] = field(default_factory=list)
    context_token: str = ""
    time_ms: Any = None


def _text_of(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind == TEXT:
        return str((item.get("text_item") or {}).get("text") or "")
    if kind == FILE:
        name = str((item.get("file_item") or {}).get("file_name") or "")
        return f"[file: {name}]" if name else "[file]"
    if kind == VIDEO:
        return "[video]"
    return ""


def _quoted(item: dict[str, Any]) -> str | None:
    ref = item.get("ref_msg")
    if not isinstance(ref, dict):
        return None
    quoted = ref.get("message_item")
    text = _text_of(quoted) if isinstance(quoted, dict) else ""
    if isinstance(quoted, dict) and quoted.get("type") == IMAGE:
        text = "[image]"
    title = str(ref.get("title") or "")
    joined = " | ".join(p for p in (title, text) if p)
    return joined or None


def parse_message(msg: Any) -> Parsed | None:
    """A user's message, or None (a bot's own message, no sender, a malformed one)."""
    if not isinstance(msg, dict) or msg.get("message_type") == BOT_MESSAGE:
        return None
    sender = str(msg.get("from_user_id") or "").strip()
    group = str(msg.get("group_id") or "").strip()
    if not _ID.match(sender) or (group and not _ID.match(group)):
        return None
    items = [i for i in msg.get("item_list") or [] if isinstance(i, dict)]
    texts = [t for t in (_text_of(i) for i in items) if t]
    quoted = next((q for q in (_quoted(i) for i in items) if q), None)
    ident = str(msg.get("message_id") or msg.get("client_id") or msg.get("seq") or "")
    voices = [i for i in items if i.get("type") == VOICE]
    said = " ".join(
        t for v in voices if (t := str((v.get("voice_item") or {}).get("text") or "").strip())
    )
    return Parsed(
        chat=ChatRef(bool(group), group or sender),
        sender=sender,
        message_id=ident,
        text="\n".join(texts),
        quoted=quoted,
        images=[i for i in items if i.get("type") == IMAGE],
        transcript=said or None,
        voices=[] if said else voices,
        context_token=str(msg.get("context_token") or ""),
        time_ms=msg.get("create_time_ms"),
    )
