"""Matrix events as chatfn sees them: chat ids, the bot's mention, replies.

Chat ids (what `chats:` rules match) hold the room id as Matrix gives it:

- `private:<room_id>` a direct chat: a room the bot was invited to as a DM (`is_direct`,
  kept in the account's `m.direct`), or a room of exactly two members (the bot and one
  person), e.g. `private:!AbCdEf:example.org`;
- `group:<room_id>` every other room, e.g. `group:!GhIjKl:example.org`. Room versions 12
  and later have ids without the server part (`!Hash...`), so match rooms by their id, or
  all of them with `group:*`. A two-member room that gains a third member becomes a group,
  with its own `group:` history.

Mentions (https://spec.matrix.org/v1.16/client-server-api/#user-and-room-mentions): the bot is
addressed when `m.mentions.user_ids` holds its user id, when the HTML `formatted_body` has a
pill linking to it (`https://matrix.to/#/@bot:example.org` or `matrix:u/bot:example.org`),
and, for clients older than `m.mentions` only, when the body holds its user id or starts with
its display name. The pill's text (the display name a client wrote into `body`) and the user
id are removed from the text the model reads.

Replies (https://spec.matrix.org/v1.16/client-server-api/#rich-replies): `m.relates_to` ->
`m.in_reply_to` -> `event_id`; the fallback older clients put in front of the body (`> <@user>
quoted` lines, then a blank line) and in `formatted_body` (`<mx-reply>`) is removed, its
quoted words kept as the quote. A thread's `is_falling_back` in_reply_to is not a reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape
from typing import Any
from urllib.parse import unquote

from chatfn.channels.kit.mentions import folded, remove_once, starts_with_word
from chatfn.channels.kit.quotes import leading_quote
from chatfn.channels.kit.sender import ChatTarget

__all__ = ["ChatRef", "Reading", "parse_chat_id", "read_content"]

HTML_FORMAT = "org.matrix.custom.html"
_PILL = re.compile(r"<a\s[^>]*href=(\"[^\"]*\"|'[^']*')[^>]*>(.*?)</a>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_MX_REPLY = re.compile(r"<mx-reply>.*?</mx-reply>", re.S | re.I)
_QUOTE_SENDER = re.compile(r"^(\*\s*)?<[@!][^>\s]+>\s?")


class ChatRef(ChatTarget):
    """A room (`target`: its id), and whether chatfn treats it as a group."""

    __slots__ = ()

    @property
    def room_id(self) -> str:
        return self.target


def parse_chat_id(chat_id: str) -> ChatRef:
    """The ChatRef of one of our chat ids; ValueError naming the expected forms."""
    kind, _, room = chat_id.partition(":")
    if kind not in ("private", "group") or not room.startswith("!") or len(room) < 2:
        raise ValueError(
            f"not a Matrix chat id: {chat_id!r} (expected private:!room:server or "
            "group:!room:server)"
        )
    return ChatRef(kind == "group", room)


@dataclass(slots=True)
class Reading:
    """What a message's content says, for chatfn."""

    text: str
    mentioned: bool = False
    reply_to: str | None = None  # event id of the message answered
    quoted: str | None = None  # its words, from the reply fallback
    quoted_sender: str | None = None
    mentions: list[str] = field(default_factory=list)


def _pill_target(href: str) -> str | None:
    """The user id a pill links to, or None."""
    href = unquote(href.strip("\"'"))
    if "matrix.to/#/" in href:
        target = href.split("matrix.to/#/", 1)[1].split("?", 1)[0]
        return target if target.startswith("@") else None
    if href.startswith("matrix:u/"):
        return "@" + href[len("matrix:u/") :].split("?", 1)[0]
    return None


def _strip_fallback(body: str) -> tuple[str, str | None, str | None]:
    """(body without the reply fallback, the quoted text, the quoted sender)."""
    rest, quoted = leading_quote(body)
    if not quoted:
        return body, None, None
    sender = None
    m = _QUOTE_SENDER.match(quoted[0])
    if m:
        sender = m.group(0).strip().lstrip("*").strip().strip("<>")
        quoted[0] = quoted[0][m.end() :]
    return rest, "\n".join(quoted).strip() or None, sender


def _tidy(text: str) -> str:
    return folded(text).lstrip(":,").strip()


def read_content(content: dict[str, Any], bot_id: str, bot_names: list[str]) -> Reading:
    """Text, mention and reply of an `m.room.message` content (see the module docstring).
    `bot_names`: the bot's display names (in this room and globally), for pills and for
    clients that write the name without `m.mentions`."""
    body = content.get("body")
    body = body if isinstance(body, str) else ""
    formatted = content.get("formatted_body")
    formatted = (
        formatted if isinstance(formatted, str) and content.get("format") == HTML_FORMAT else ""
    )
    reading = Reading(text=body)

    relates = content.get("m.relates_to")
    if isinstance(relates, dict):
        in_reply = relates.get("m.in_reply_to")
        if isinstance(in_reply, dict) and not relates.get("is_falling_back"):
            event_id = in_reply.get("event_id")
            if isinstance(event_id, str) and event_id:
                reading.reply_to = event_id
    if reading.reply_to is not None:
        body, reading.quoted, reading.quoted_sender = _strip_fallback(body)
        formatted = _MX_REPLY.sub("", formatted)

    mentions = content.get("m.mentions")
    if isinstance(mentions, dict):
        ids = mentions.get("user_ids")
        reading.mentions = [u for u in ids if isinstance(u, str)] if isinstance(ids, list) else []
    labels = [
        _TAG.sub("", unescape(label)).strip()
        for href, label in _PILL.findall(formatted)
        if _pill_target(href) == bot_id
    ]
    names = [n for n in bot_names if n]
    legacy = not isinstance(mentions, dict) and (
        bot_id in body or any(starts_with_word(body, n) for n in names)
    )
    reading.mentioned = bot_id in reading.mentions or bool(labels) or legacy

    if reading.mentioned:
        for label in labels:
            body, _ = remove_once(body, label)
        body = body.replace(bot_id, "")
        for name in sorted(names, key=len, reverse=True):
            if starts_with_word(body, name):
                body = body.lstrip()[len(name) :]
                break
    reading.text = _tidy(body)
    return reading
