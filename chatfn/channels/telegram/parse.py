"""Telegram messages as chatfn sees them: chat ids, the bot's mention, commands.

Chat ids (what `chats:` rules match):

- `private:<user_id>` a private chat (Telegram's chat id of a private chat is the user's id);
- `group:<chat_id>` a group or supergroup (negative ids: `group:-1001234567890`);
- `group:<chat_id>:topic:<message_thread_id>` a forum topic of a supergroup: each topic is its
  own conversation (its own history, persona, model), and replies go to that topic. The
  General topic, and threads of replies in groups that are not forums, are the group itself.

Entity offsets and lengths count UTF-16 code units (Bot API, MessageEntity), so the text is
cut in UTF-16 and decoded back.
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram import Message, MessageEntity

__all__ = ["ChatRef", "Addressing", "address", "chat_ref", "parse_chat_id"]


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a message goes on Telegram: the chat, and the forum topic in it."""

    chat_id: int
    thread_id: int | None = None
    is_group: bool = False

    @property
    def key(self) -> str:
        if not self.is_group:
            return f"private:{self.chat_id}"
        if self.thread_id is not None:
            return f"group:{self.chat_id}:topic:{self.thread_id}"
        return f"group:{self.chat_id}"


def chat_ref(message: Message) -> ChatRef:
    chat = message.chat
    if chat.type == "private":
        return ChatRef(chat.id)
    topic = message.message_thread_id if message.is_topic_message else None
    return ChatRef(chat.id, topic, is_group=True)


def parse_chat_id(chat_id: str) -> ChatRef:
    """The ChatRef of one of our chat ids; ValueError naming the expected forms."""
    kind, _, rest = chat_id.partition(":")
    try:
        if kind == "private":
            return ChatRef(int(rest))
        if kind == "group":
            head, _, topic = rest.partition(":topic:")
            return ChatRef(int(head), int(topic) if topic else None, is_group=True)
    except ValueError:
        pass
    raise ValueError(f"{chat_id!r} is not a Telegram chat id (private:N, group:N, group:N:topic:N)")


@dataclass(slots=True)
class Addressing:
    text: str  # the text with the bot's mention (and a command's @botname) removed
    at_bot: bool  # the bot was mentioned, replied to, or given a command
    other_bot: bool  # a command addressed to another bot (`/help@otherbot`): not ours


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _back(units: bytes) -> str:
    return units.decode("utf-16-le", "surrogatepass")


def address(message: Message, bot_id: int, username: str) -> Addressing:
    """Find and remove the bot's mention: an `@username` mention entity, a text_mention of the
    bot, `/command@username`. A reply to the bot's own message addresses it too, and so does
    a bare `/command` (Telegram sends commands in groups to every bot, privacy mode or not)."""
    text = message.text or message.caption or ""
    entities = message.entities or message.caption_entities or ()
    units = _utf16(text)
    name = username.lower()
    cuts: list[tuple[int, int, bool]] = []  # UTF-16 unit ranges to remove; eat a space after
    at_bot = other_bot = False
    for entity in entities:
        start, end = entity.offset, entity.offset + entity.length
        piece = _back(units[2 * start : 2 * end])
        if entity.type == MessageEntity.MENTION and piece[1:].lower() == name:
            cuts.append((start, end, True))
            at_bot = True
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            cuts.append((start, end, True))
            at_bot = True
        elif entity.type == MessageEntity.BOT_COMMAND and start == 0:
            command, _, target = piece.partition("@")
            if not target:
                at_bot = True
            elif target.lower() == name:
                cuts.append((start + len(_utf16(command)) // 2, end, False))
                at_bot = True
            else:
                other_bot = True
    replied = message.reply_to_message
    # In a forum every message replies to its topic's root (forum_topic_created): not to us.
    if (
        replied is not None
        and replied.forum_topic_created is None
        and replied.from_user is not None
        and replied.from_user.id == bot_id
    ):
        at_bot = True
    for start, end, space in sorted(cuts, reverse=True):
        if space and units[2 * end : 2 * end + 2] == b" \x00":  # the mention's space goes too
            end += 1
        units = units[: 2 * start] + units[2 * end :]
    return Addressing(_back(units).strip(), at_bot, other_bot)
