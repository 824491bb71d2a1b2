"""Slack chat ids and what a user's message says once Slack's markup is read.

Chat ids (what `chats:` rules match): `private:<D...>` for a direct message (the im channel's
id), `group:<C...>` / `group:<G...>` for a channel, a private channel or a group DM (mpim), and
`<chat>:thread:<thread_ts>` for a thread: each thread is its own conversation (its own history
and turn order), like a Telegram forum topic, and a reply to a message in a thread goes into
that thread because the chat id says where. Match a channel with its threads as
`group:C0123ABCD*`.

Incoming text (https://api.slack.com/reference/surfaces/formatting#retrieving-messages): the
bot's `<@U...>` mention is removed (it addressed the bot); other markup is made readable
(`<@U1>` -> `@U1`, `<#C1|general>` -> `#general`, `<!here>` -> `@here`,
`<https://x|label>` -> `label (https://x)`), then `&amp;`, `&lt;` and `&gt;` are unescaped.
"""

from __future__ import annotations

import re

from chatfn.channels.kit.chats import ThreadChat

__all__ = ["ChatRef", "chat_ref", "parse_chat_id", "read_text"]

_ID = re.compile(r"^[A-Z0-9]{2,40}$")
_TS = re.compile(r"^\d{1,12}\.\d{1,9}$")
_MARKUP = re.compile(r"<([^<>]*)>")


#: Where a message is: the Slack channel id (`target`), the thread (its parent's ts) if any.
ChatRef = ThreadChat


def chat_ref(channel: str, channel_type: str | None, thread_ts: str | None, ts: str) -> ChatRef:
    """The chat of a message event. `channel_type` is "im" for a DM ("channel", "group",
    "mpim" otherwise; app_mention events carry none: a D... channel id is a DM). A thread's
    parent (thread_ts == ts) is the top-level message, so it stays in the channel's chat."""
    is_dm = channel_type == "im" if channel_type else channel.startswith("D")
    thread = thread_ts if thread_ts and thread_ts != ts else None
    return ChatRef(not is_dm, channel, thread)


def parse_chat_id(chat_id: str) -> ChatRef:
    """A chat id back to where to post; ValueError naming the expected shape."""
    shapes = "private:<D...>, group:<C...> or group:<C...>:thread:<ts>"
    return ChatRef.parse(chat_id, _ID, _TS, "Slack", shapes)


def read_text(text: str, bot_user_id: str) -> tuple[str, bool]:
    """(what the user said, whether it mentioned the bot) from a message's `text`."""
    mentioned = False

    def one(match: re.Match[str]) -> str:
        nonlocal mentioned
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            if bot_user_id and target[1:] == bot_user_id:
                mentioned = True
                return ""
            return "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            if target.startswith("!subteam^"):
                return label or "@group"
            if target.startswith("!date^"):
                return label or target
            return "@" + target[1:]
        if label and label != target and label != target.removeprefix("mailto:"):
            return f"{label} ({target})"
        return label or target

    read = _MARKUP.sub(one, text)
    read = read.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", read).strip(), mentioned
