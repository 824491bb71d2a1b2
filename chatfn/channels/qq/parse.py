"""QQ chat ids, and what a QQ message event says once the bot's mention is removed.

Chat ids (what `chats:` rules match) hold the platform's own ids:
- `group:<group_openid>`: a QQ group (GROUP_AT_MESSAGE_CREATE; QQ sends a group's messages to
  a bot only when they @-mention it);
- `c2c:<user_openid>`: a private (C2C) chat with a QQ user (C2C_MESSAGE_CREATE);
- `channel:<channel_id>`: a text channel of a QQ guild (频道) (AT_MESSAGE_CREATE, and
  MESSAGE_CREATE for private-domain bots);
- `dm:<guild_id>`: a guild direct message session (DIRECT_MESSAGE_CREATE: its `guild_id` is
  the DM session's, which is where replies are posted).

Openids are per bot: the same person has another openid with another bot, and a group
member's `member_openid` differs from their C2C `user_openid`.

Mentions (https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/trans/text-chain.html):
`<@user_id>` and `<@!user_id>` in a message's content; the bot's own is removed. In QQ
groups the platform removes the bot's @ itself and leaves a leading space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from chatfn.channels.kit.mentions import read_mentions

__all__ = ["ChatRef", "Scene", "guild_roles", "parse_chat_id", "read_content"]

Scene = Literal["group", "c2c", "channel", "dm"]
SCENES: tuple[Scene, ...] = ("group", "c2c", "channel", "dm")
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")
_MENTION = re.compile(r"<@!?([A-Za-z0-9_\-]+)>")
#: Guild role ids QQ fixes for every guild (https://bot.q.qq.com/wiki/develop/api-v2/
#: server-inter/channel/role-group/role/model.html, DefaultRoleIDs): 4 the guild's creator,
#: 2 its administrators. 5 (a channel's administrator) is not trusted: the role does not say
#: which channels.
OWNER_ROLES = frozenset({"4"})
ADMIN_ROLES = frozenset({"2"})


@dataclass(frozen=True, slots=True)
class ChatRef:
    scene: Scene
    target: str  # group_openid, user_openid, channel_id or (DM) guild_id

    @property
    def key(self) -> str:
        return f"{self.scene}:{self.target}"

    @property
    def is_group(self) -> bool:
        return self.scene in ("group", "channel")

    @property
    def v2(self) -> bool:
        """Groups and C2C use the v2 API (msg_seq, media via /files); guilds the v1 one."""
        return self.scene in ("group", "c2c")

    @property
    def messages_path(self) -> str:
        return {
            "group": f"/v2/groups/{self.target}/messages",
            "c2c": f"/v2/users/{self.target}/messages",
            "channel": f"/channels/{self.target}/messages",
            "dm": f"/dms/{self.target}/messages",
        }[self.scene]

    @property
    def files_path(self) -> str:
        kind = "groups" if self.scene == "group" else "users"
        return f"/v2/{kind}/{self.target}/files"


def parse_chat_id(chat_id: str) -> ChatRef:
    """A chat id back to where to post; ValueError naming the expected shapes."""
    scene, _, target = chat_id.partition(":")
    if scene in SCENES and _ID.match(target):
        return ChatRef(scene, target)
    raise ValueError(
        f"not a QQ chat id: {chat_id!r} (expected group:<group_openid>, c2c:<user_openid>, "
        "channel:<channel_id> or dm:<guild_id>)"
    )


def read_content(content: str, bot_id: str) -> tuple[str, bool]:
    """(what the user said, whether it mentioned the bot): the bot's `<@id>`/`<@!id>` removed,
    other mentions kept as `@id` (kit/mentions.py)."""
    return read_mentions(content, _MENTION, bot_id, lambda _kind, ident: "@" + ident)


def guild_roles(member: Any) -> list[str]:
    """The roles ("owner", "admin") of a guild message's `member.roles`."""
    found = member.get("roles") if isinstance(member, dict) else None
    roles = {str(r) for r in found or []}
    if roles & OWNER_ROLES:
        return ["owner"]
    return ["admin"] if roles & ADMIN_ROLES else []
