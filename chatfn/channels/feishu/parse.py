"""Feishu chat ids, and what a user's message says once its content is read.

Chat ids (what `chats:` rules match): `private:<oc_...>` for a one-to-one chat with the bot
(Feishu's p2p chat has its own chat_id), `group:<oc_...>` for a group chat, and
`group:<oc_...>:thread:<om_...>` for a thread (a topic of a topic group, or a thread opened
under a message): each thread is its own conversation, named by its root message, the one the
answer is sent under (the reply API with `reply_in_thread`). All hold the platform's chat_id,
which is also where an answer outside a thread goes (receive_id_type=chat_id), so a reply, a
reminder and a message the outbox owes after a restart need nothing but the chat id.
Senders (`sender_id`, `bot.admins`) are open_ids (`ou_...`: per app, the same person has
another open_id in another app).

Incoming content (im.message.receive_v1, https://open.feishu.cn/document/server-docs/
im-v1/message/events/receive and .../im-v1/message-content-description/message_content):
- `text`: {"text": "@_user_1 hello"}: each `@_user_N` placeholder is a `mentions` entry
  (key, id.open_id, name). The bot's own (its open_id, from bot/v3/info) is removed and
  marks the message as addressed to the bot; others read as `@Name`; `@_all` as `@all`.
- `post`: {"title", "content": [[{"tag": "text"|"a"|"at"|"img"|"code_block"|...}]]}: read as
  lines of text (links as `label (url)`), its `img` elements as images.
- `image`: {"image_key"}: an image, fetched through the message resources API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chatfn.channels.kit.chats import ThreadChat
from chatfn.channels.kit.mentions import folded
from chatfn.channels.kit.wire import json_object

__all__ = ["ChatRef", "Read", "chat_ref", "parse_chat_id", "read_message"]

_CHAT = re.compile(r"^oc_[A-Za-z0-9_\-]{1,64}$")
_MESSAGE = re.compile(r"^om_[A-Za-z0-9_\-]{1,64}$")


#: Where a message is: the Feishu chat_id (`target`), the thread's root message if in a thread.
ChatRef = ThreadChat


def chat_ref(message: dict[str, Any]) -> ChatRef:
    """The chat of im.message.receive_v1's `message`: a thread when it has a `thread_id`
    (its root message: `root_id`, or the message itself when it starts the thread)."""
    is_group = message.get("chat_type") != "p2p"
    thread = None
    if is_group and message.get("thread_id"):
        root = str(message.get("root_id") or message.get("message_id") or "")
        thread = root if _MESSAGE.match(root) else None
    return ChatRef(is_group, str(message.get("chat_id") or ""), thread)


def parse_chat_id(chat_id: str) -> ChatRef:
    """A chat id back to where to send; ValueError naming the expected shape."""
    shapes = "private:oc_..., group:oc_... or group:oc_...:thread:om_..."
    return ChatRef.parse(chat_id, _CHAT, _MESSAGE, "Feishu", shapes, private_threads=False)


@dataclass(slots=True)
class Read:
    """What a message says: its text, whether it mentioned the bot, its images' keys."""

    text: str
    mentioned: bool = False
    image_keys: list[str] = field(default_factory=list)
    # An `audio` message's file_key (Ogg/Opus), fetched as a file resource for speech to text.
    audio_keys: list[str] = field(default_factory=list)


def _content(message: dict[str, Any]) -> dict[str, Any]:
    return json_object(str(message.get("content") or "{}")) or {}


def read_message(message: dict[str, Any], bot_open_id: str) -> Read:
    """The `message` object of im.message.receive_v1, read (module docstring)."""
    names, mentioned = _mention_names(message, bot_open_id)
    kind = message.get("message_type")
    content = _content(message)
    read = Read("", mentioned)
    if kind == "text":
        read.text = _place(names, str(content.get("text") or ""))
    elif kind == "image":
        if content.get("image_key"):
            read.image_keys.append(str(content["image_key"]))
    elif kind == "post":
        read.text = _read_post(content, names, read.image_keys)
    elif kind == "audio" and content.get("file_key"):
        read.audio_keys.append(str(content["file_key"]))
    read.text = folded(read.text)
    return read


def _mention_names(message: dict[str, Any], bot_open_id: str) -> tuple[dict[str, str], bool]:
    """What each mention key (`@_user_1`) is shown as (the bot's own: nothing), and whether
    the bot was mentioned."""
    names: dict[str, str] = {}
    mentioned = False
    for m in message.get("mentions") or []:
        if not isinstance(m, dict):
            continue
        key = str(m.get("key") or "")
        who = m.get("id")
        if not isinstance(who, dict):
            who = {}
        if bot_open_id and who.get("open_id") == bot_open_id:
            names[key] = ""
            mentioned = True
        elif key:
            names[key] = "@" + str(m.get("name") or who.get("open_id") or "someone")
    return names, mentioned


def _place(names: dict[str, str], text: str) -> str:
    for key in sorted(names, key=len, reverse=True):  # @_user_10 before @_user_1
        text = text.replace(key, names[key])
    return text.replace("@_all", "@all")


def _read_post(content: dict[str, Any], names: dict[str, str], image_keys: list[str]) -> str:
    """A rich-text post as lines of text: its title, then a line per paragraph."""
    post = content
    if "content" not in post:  # the sending shape, with a language wrapper
        post = next((v for v in content.values() if isinstance(v, dict)), {})
    lines = [str(post.get("title") or "")] if post.get("title") else []
    for paragraph in post.get("content") or []:
        parts: list[str] = []
        for element in paragraph if isinstance(paragraph, list) else []:
            shown = _post_element(element, names, image_keys) if isinstance(element, dict) else None
            if shown is not None:
                parts.append(shown)
        if parts:
            lines.append(folded(_place(names, "".join(parts))))
    return "\n".join(lines)


def _post_element(
    element: dict[str, Any], names: dict[str, str], image_keys: list[str]
) -> str | None:
    """One element of a post paragraph as text (None for one that shows none: an image, whose
    key is collected, or an unknown tag)."""
    tag = element.get("tag")
    if tag in ("text", "md", "code_block"):
        return str(element.get("text") or "")
    if tag == "a":
        label, href = str(element.get("text") or ""), str(element.get("href") or "")
        return f"{label} ({href})" if label and label != href else href
    if tag == "at":
        key = str(element.get("user_id") or "")
        if key in names:
            return names[key]
        if key in ("@_all", "all"):
            return "@all"
        return "@" + str(element.get("user_name") or key)
    if tag == "emotion":
        return f":{element.get('emoji_type', '')}:"
    if tag == "img" and element.get("image_key"):
        image_keys.append(str(element["image_key"]))
    return None
