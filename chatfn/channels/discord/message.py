"""Discord messages <-> chatfn messages: chat ids, the bot's mention, roles, attachments, and
the parts a reply is sent as.

Chat ids (what `chats:` rules match, `fnmatch` style):
- `guild:<guild id>/channel:<channel id>`: a guild's text (or announcement, voice-text) channel;
- `guild:<guild id>/thread:<thread id>`: a thread (its own conversation; the parent channel
  is not part of the id: a thread is its own channel in Discord's API);
- `dm:<user id>`: a direct message with that user (the DM channel is looked up, or opened,
  from the user id when sending, so a reminder survives a restart).
`guild:<id>/*` matches everything in one server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import discord

from chatfn.channels.kit.keys import part_key
from chatfn.channels.kit.media import is_audio, is_image
from chatfn.channels.kit.mentions import read_mentions
from chatfn.channels.kit.quotes import quote_line
from chatfn.channels.kit.roster import roles
from chatfn.channels.markdown import to_discord
from chatfn.channels.split import split_message, utf16_len
from chatfn.common.messages import OutgoingMessage

#: A user's mention (`<@id>`, `<@!id>` the legacy nick form), a role's and a channel's.
_MENTION = re.compile(r"<(@!?|@&|#)(\d+)>")
#: Room kept in the first part for the `<@id> ` mention placed before it.
MENTION_ROOM = 32


@dataclass(frozen=True, slots=True)
class Target:
    """Where a chat id sends: a channel (or thread) id, or the user of a DM; `key` is the
    chat id (the chat's order of sends)."""

    channel_id: int | None = None
    guild_id: int | None = None
    dm_user: int | None = None
    key: str = ""


def chat_id_of(message: discord.Message) -> str:
    channel = message.channel
    guild_id = message.guild.id if message.guild is not None else getattr(channel, "guild_id", None)
    return chat_id_in(guild_id, channel, channel.id, message.author.id)


def chat_id_in(guild_id: int | None, channel: object, channel_id: int, user_id: int) -> str:
    """The chat id of a message or a press by `user_id` in `channel` (a thread or not) of
    the guild `guild_id` (None: a DM)."""
    if guild_id is None:
        return f"dm:{user_id}"
    kind = "thread" if isinstance(channel, discord.Thread) else "channel"
    return f"guild:{guild_id}/{kind}:{channel_id}"


def target_of(chat_id: str) -> Target | None:
    """The target of a chat id this channel made; None for anything else."""
    kind, _, rest = chat_id.partition(":")
    if kind == "dm" and rest.isdigit():
        return Target(dm_user=int(rest), key=chat_id)
    if kind == "guild":
        guild, _, where = rest.partition("/")
        what, _, channel = where.partition(":")
        if guild.isdigit() and what in ("channel", "thread") and channel.isdigit():
            return Target(channel_id=int(channel), guild_id=int(guild), key=chat_id)
    return None


def chat_target(chat_id: str) -> Target:
    """The target of a chat id to send to; ValueError for anything else (refused for good)."""
    target = target_of(chat_id)
    if target is None:
        raise ValueError(f"{chat_id!r} is not a Discord chat id")
    return target


def mentions_bot(message: discord.Message, bot: discord.ClientUser) -> bool:
    """The bot's own managed role, or a reply to one of the bot's messages (its `<@id>` /
    `<@!id>`: `readable`)."""
    if any(getattr(r.tags, "bot_id", None) == bot.id for r in message.role_mentions):
        return True
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot.id


def readable(message: discord.Message, bot_id: int) -> tuple[str, bool]:
    """(The content a model reads, whether it mentions the bot): the bot's mention removed,
    other mentions as `@name` / `#channel` (kit/mentions.py), attachments that are not
    images named."""
    names = {str(m.id): m.display_name for m in message.mentions}
    roles = {str(r.id): r.name for r in message.role_mentions}
    guild = message.guild

    def shown(kind: str, ident: str) -> str | None:
        if kind != "#":
            return "@" + (roles if kind == "@&" else names).get(ident, ident)
        found = guild.get_channel_or_thread(int(ident)) if guild is not None else None
        return f"#{found.name}" if found is not None else None

    users = ("@", "@!")
    text, mentioned = read_mentions(message.content, _MENTION, str(bot_id), shown, users)
    files = [
        f"[file: {a.filename}, {a.size} bytes]"
        for a in message.attachments
        if not is_image(a.content_type, a.filename) and not is_audio(a.content_type, a.filename)
    ]
    if files:
        text = "\n".join([text, *files]).strip()
    return text, mentioned  # the kit's `incoming` cleans the text and caps its length


def audio_of(message: discord.Message) -> list[str]:
    """The first audio attachment's CDN URL (downloaded, bounded, and transcribed by
    voice.stt); Discord's own voice messages are `voice-message.ogg`, audio/ogg."""
    return [a.url for a in message.attachments if is_audio(a.content_type, a.filename)][:1]


def images_of(message: discord.Message) -> list[str]:
    """The image attachments' CDN URLs (fetched, bounded, when a vision model needs them)."""
    return [a.url for a in message.attachments if is_image(a.content_type, a.filename)]


def roles_of(guild: discord.Guild | None, author: object) -> list[str]:
    """`owner` (the guild's owner) or `admin` (ADMINISTRATOR or MANAGE_GUILD from the
    member's roles) of a message's or a press's author, as Discord reports them:
    `bot.trust_group_admins`."""
    if not isinstance(author, discord.Member):
        return []
    owner, perms = guild is not None and guild.owner_id == author.id, author.guild_permissions
    return roles(owner, perms.administrator or perms.manage_guild)


def quoted(message: discord.Message) -> tuple[str | None, list[str]]:
    """The text and images of the message this one replies to (Discord sends it along)."""
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    if not isinstance(resolved, discord.Message):
        return None, []
    return quote_line(resolved.author.display_name, readable(resolved, -1)[0]), images_of(resolved)


@dataclass(slots=True)
class Part:
    """One Discord message of a reply: its content (the first part's with the mention), the
    Markdown it was rendered from (what is owed if sending stops here) and its nonce; the last
    one also carries the images and the voice (channel.py's `_options`)."""

    content: str
    source: str
    nonce: str | None = None


def parts_of(out: OutgoingMessage, limit: int) -> list[Part]:
    """The messages `out` is sent as: Markdown rendered for Discord and split within `limit`
    (UTF-16 units, kept below 2000 with room for a mention), the mention before the first
    part. Each part has a nonce fixed by its outbox row, index and text: Discord
    (`enforce_nonce`) answers a repeat with the message it made the first time, so a retry or
    a re-send after a crash never posts it twice."""
    sources = split_message(out.text, limit - MENTION_ROOM, render=to_discord, measure=utf16_len)
    if not sources and (out.images or out.audio):
        sources = [""]
    parts = [Part(to_discord(s) if s else "", s) for s in sources]
    if parts and out.at:
        parts[0].content = f"<@{out.at}> {parts[0].content}".rstrip()
    for index, part in enumerate(parts):
        # At most 25 characters (Discord's limit); none without an outbox row (a random one).
        if out.event_id is not None:
            part.nonce = part_key(out.event_id, index, part.content, 25, short=True)
    return parts
