"""KOOK's chat ids and what comes in: a message event's text, mentions and roles.

Chats: a guild's text channel is `group:<channel id>` (`channel_type: GROUP`, `target_id`
the channel), a direct message `private:<user id>` (`channel_type: PERSON`: `target_id` is
the bot, `author_id` the user). Event shapes: developer.kookapp.cn/doc/event/
event-introduction and /doc/event/message.

Text: `type` 1 (text) and 9 (KMarkdown) carry `content`; KMarkdown's escapes are undone
and its mentions read: `(met)<bot id>(met)` is the bot's (removed), another user's becomes
`@<name>` from `extra.kmarkdown.mention_part`, `(met)all(met)` / `(met)here(met)`
`@all` / `@here`, `(rol)<id>(rol)` `@<role name>`, `(chn)<id>(chn)` `#<channel>`.
`extra.mention` (user ids) says whether the bot was mentioned. `type` 2 is an image: its
`content` is the image's URL.

Roles for `bot.trust_group_admins`: the guild's owner (`/v3/guild/view`'s `user_id`) is
"owner"; a member holding a role with the administrator permission (bit 0 of the role's
`permissions`, /v3/guild-role/list) is "admin" (developer.kookapp.cn/doc/http/guild-role).
"""

from __future__ import annotations

import re
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit.mentions import folded, read_mentions

__all__ = ["ADMINISTRATOR", "ChatRef", "parse_chat_id", "read_text", "roles_of"]

_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
#: The administrator permission bit (guild-role.md, "权限说明": bit 0, value 1).
ADMINISTRATOR = 1
_TAG = re.compile(r"\((met|rol|chn)\)([^()\s]{1,64})\(\1\)")
_ESCAPE = re.compile(r"\\(.)", re.S)


#: Where a message goes: a channel (`group`) or a user's DMs (`private`).
ChatRef = kit.ChatTarget


def parse_chat_id(chat_id: str) -> ChatRef:
    kind, _, target = chat_id.partition(":")
    if kind not in ("group", "private") or not _ID.match(target):
        raise ValueError(
            f"not a KOOK chat id: {chat_id!r} (expected group:<channel id> or private:<user id>)"
        )
    return ChatRef(kind == "group", target)


def _names(extra: dict[str, Any], part: str, key: str, name: str) -> dict[str, str]:
    found = (extra.get("kmarkdown") or {}).get(part) if isinstance(extra, dict) else None
    out: dict[str, str] = {}
    for item in found or []:
        if isinstance(item, dict) and item.get(key) is not None:
            out[str(item[key])] = str(item.get(name) or item.get("username") or item[key])
    return out


def read_text(content: str, kind: int, extra: dict[str, Any], bot_id: str) -> tuple[str, bool]:
    """(the text the bot reads, whether the bot is mentioned) of a message's content."""
    names = {
        "met": _names(extra, "mention_part", "id", "username"),
        "rol": _names(extra, "mention_role_part", "role_id", "name"),
        "chn": _names(extra, "channel_part", "id", "name"),
    }

    def shown(tag: str, ident: str) -> str:
        return ("#" if tag == "chn" else "@") + names[tag].get(ident, ident)

    # KMarkdown's escapes are undone once its mentions are read, before the text is folded.
    text, named = read_mentions(content, _TAG, bot_id, shown, ("met",), fold=kind != 9)
    if kind == 9:
        text = folded(_ESCAPE.sub(r"\1", text))
    return text, named or bot_id in [str(m) for m in (extra.get("mention") or [])]


def roles_of(user_id: str, role_ids: list[Any], owner: str, admin_roles: set[str]) -> list[str]:
    """The kit's role names of a guild member: ["owner"], ["admin"], or none."""
    if user_id and user_id == owner:
        return ["owner"]
    if any(str(r) in admin_roles for r in role_ids):
        return ["admin"]
    return []
