"""The Discord channel: guild channels, threads and DMs through discord.py (the maintained
Python SDK: Gateway with HELLO/heartbeat/IDENTIFY/RESUME and reconnect with backoff, REST
with per-route rate-limit buckets and 429 `retry_after` handled inside its HTTP client).

Incoming (Gateway MESSAGE_CREATE): the bot's own and other bots' messages are ignored; in a
guild, a message addresses the bot when it mentions it (`<@id>`, `<@!id>`, the bot's managed
role) or replies to one of its messages; the mention is removed from the text. Image
attachments go to vision models as URLs, the message replied to as `quoted_text`. The
sender's roles (`owner`; `admin` for ADMINISTRATOR / MANAGE_GUILD) come from the guild's
roles in the Gateway's cache (`bot.trust_group_admins`). GUILD_MEMBER_ADD reaches the
welcome in the guild's system channel. Chat ids: message.py. At each new session (READY,
not RESUMED) what recently active chats said meanwhile is read back: `catch_up`.

Buttons (OutgoingMessage.buttons: an approval request's Approve / Deny) go under the last part;
a press (Gateway INTERACTION_CREATE, a component) is deferred at once and becomes the
presser's message with the button's text, roles as for a message.

Outgoing: a reply goes out in order per chat (DiscordSender, on the kit's sender), split
under 2000 characters on paragraph / code-block boundaries, rendered as Discord Markdown
with escaping; mentions only ping the user `reply_with_mention` names (never @everyone
from a model's text). Every part carries a nonce fixed by its outbox row: discord.py sends
it with `enforce_nonce`, so its own retries (429, 5xx) and a re-send after a crash return
the first message instead of posting a second; for rows owed from longer ago, `find_sent`
reads the channel's recent messages. The outbox is not asked to retry what discord.py is
still retrying (a 429 waits inside `send`), so nothing is sent twice and one chat's
messages never overtake each other.

Failures: a network error or a 5xx raises NotDelivered (the outbox keeps the message and
sends it when the Gateway is back); 403 (a missing permission) or 404 (a deleted channel)
raise DeliveryRefused with one log line naming the channel and Discord's error. A token
Discord refuses, or privileged intents not granted, are one line naming what to fix, the
channel shown as down and a slow retry (the kit's connect loop); the rest of the bot runs on.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import aiohttp
import discord
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.discord.client import DiscordClient, make_client
from chatfn.channels.discord.message import (
    Part,
    Target,
    audio_of,
    chat_id_in,
    chat_id_of,
    chat_target,
    images_of,
    mentions_bot,
    parts_of,
    quoted,
    readable,
    roles_of,
    target_of,
)
from chatfn.channels.discord.settings import DiscordSettings
from chatfn.channels.kit import sent as kit_sent
from chatfn.channels.kit.catchup import missed_window, read_back
from chatfn.channels.kit.presses import press_message
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.runtime.channel_host import ChannelHost

_HANDLED = (discord.MessageType.default, discord.MessageType.reply)
#: The most messages of one chat read back at a new session (`catch_up`).
HISTORY = 50
_NETWORK = (aiohttp.ClientError, OSError, asyncio.TimeoutError, discord.DiscordServerError)
_REFUSED_TOKEN = (
    "Discord refused channels.discord.token (401 Unauthorized at /users/@me): reset the token "
    "on the bot's page of the developer portal"
)


class DiscordChannel(kit.PlatformChannel[DiscordSettings], platform="discord", label="Discord"):
    skip_stored = False  # catch-up reads the history itself; `inbound.first_sight` dedupes

    def __init__(self, host: ChannelHost, settings: DiscordSettings) -> None:
        super().__init__(host, settings)
        self.client: DiscordClient | None = None
        self.sender = DiscordSender(self, settings, self.policy)
        self._running: asyncio.Future[None] | None = None

    # -- connect, serve, close -------------------------------------------------------------
    async def start(self) -> None:
        """Run in the background (the contract's driver); `wait_ready` for the Gateway."""
        if self._running is None:
            self._running = asyncio.ensure_future(self.run())

    async def connect(self) -> str:
        """Log in (REST `/users/@me`) with a fresh client (a closed one cannot log in): who the
        bot is."""
        if not self.cfg.token:
            raise kit.CredentialsRefused("channels.discord.token is not set")
        if self.client is not None:
            await self.client.close()
        self.client = make_client(
            self.cfg,
            {
                "ready": self._on_ready,
                "resumed": self._on_resumed,
                "disconnect": self._on_disconnect,
                "message": self._on_message,
                "member_join": self._member_joined,
                "interaction": self._on_interaction,
            },
        )
        try:
            await self.client.login(self.cfg.token)
        except discord.LoginFailure:
            raise kit.CredentialsRefused(_REFUSED_TOKEN) from None
        except (*_NETWORK, discord.HTTPException) as exc:
            # Discord (or the network) is down: messages wait in the outbox meanwhile.
            raise kit.Unreachable(
                f"Discord not reachable at {self.cfg.api_base}: {exc!r}"
            ) from None
        user = self.client.user
        self.host.kick()  # REST works now: what the outbox owes can go
        return f"logged in as {user} ({user.id if user else '?'})"

    async def serve(self) -> None:
        """discord.py's connect loop: RESUME after a drop, re-IDENTIFY after an invalid
        session, exponential backoff between attempts. It returns or raises only for what
        retrying cannot fix: a refused token or intents are the kit's one line and slow retry."""
        assert self.client is not None
        try:
            await self.client.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            raise kit.CredentialsRefused(
                "Discord refused the Gateway intents (close code 4014): enable 'Message "
                "Content Intent' and 'Server Members Intent' on the bot's page of the "
                "developer portal (or set channels.discord.member_events: false)"
            ) from None
        except discord.LoginFailure:
            raise kit.CredentialsRefused(_REFUSED_TOKEN) from None
        except discord.ConnectionClosed as exc:
            if exc.code == 4004:  # authentication failed: the token was revoked
                raise kit.CredentialsRefused(_REFUSED_TOKEN) from None
            raise kit.CredentialsRefused(
                f"Discord Gateway closed the connection for good: code {exc.code}"
            ) from None

    async def close(self) -> None:
        if self.client is not None and not self.client.is_closed():
            await self.client.close()

    # -- incoming --------------------------------------------------------------------------
    async def _on_ready(self) -> None:
        """A new session: what was said without one is read back (`catch_up`)."""
        self.up()
        self.spawn(self.catch_up())

    async def catch_up(self) -> int:
        """Messages posted while the bot was not connected, handed on like live ones; returns
        how many. A RESUME replays what the session missed (discord.py does it), but a new
        session (a restart, an invalid session, a resume refused) starts with nothing: what a
        chat said meanwhile never arrives as an event. At each READY the chats with a user
        message stored within `bot.resume_window` get one history read each (`GET
        /channels/{id}/messages?after=`, up to HISTORY messages after the chat's newest stored
        one); messages in it that are not the bot's and not stored yet are handled like live
        ones, in order (the kit's catch-up, chatfn/channels/kit/catchup.py). A message that
        also arrives live is handled once (`inbound.first_sight`, by message id).

        Not covered: a chat with no user message stored within the window (the bot cannot know
        it was spoken in), and more than HISTORY messages of one chat."""
        if self.client is None or self.client.user is None:
            return 0
        me = self.client.user.id
        window = await missed_window(self.host, self.platform, datetime.now(UTC))

        def theirs(chat_id: str, after: datetime) -> AsyncIterator[discord.Message]:
            read = self.history(chat_id, after, HISTORY)
            return (seen async for seen in read if seen.author.id != me)

        def skipped(chat_id: str, exc: Exception) -> None:
            why = exc if isinstance(exc, discord.HTTPException) else repr(exc)
            logger.debug("Discord catch-up of {} skipped: {}", chat_id, why)

        errors = (discord.HTTPException, OSError)
        found = await read_back(
            self.host, self.platform, window, theirs, _ident, self._on_message, errors, skipped
        )
        if found:
            logger.info("Discord: {} message(s) said while the bot was away handled now", found)
        return found

    async def _on_resumed(self) -> None:  # the missed events were replayed
        self.up()

    async def _on_disconnect(self) -> None:  # discord.py reconnects on its own
        if not self.stopping:
            self.down(kit.Unreachable("Discord Gateway connection lost"))

    async def _on_message(self, message: discord.Message, chat_id: str | None = None) -> None:
        client = self.client
        if client is None or client.user is None:
            return
        if message.author.id == client.user.id:
            return  # our own messages; other bots' come marked, answered only where a
            # chats: rule sets answer_bots (README, "Loop guard")
        if message.type not in _HANDLED:
            return  # joins, pins, boosts: system messages
        if not self.inbound.first_sight(message.id):
            return  # caught up from the history already (or the other way round)
        chat = chat_id or chat_id_of(message)
        # Handled off the Gateway reader, one chat's messages in the order they came.
        self.inbound.message(chat, str(message.id), lambda: self._incoming(message, chat))

    async def _incoming(self, message: discord.Message, chat_id: str) -> IncomingMessage | None:
        assert self.client is not None and self.client.user is not None
        bot = self.client.user
        is_group = not chat_id.startswith("dm:")
        quote_text, quote_images = quoted(message)
        text, named = readable(message, bot.id)
        # None for a bare mention or a sticker: nothing to answer.
        return self.incoming(
            chat_id,
            str(message.author.id),
            text,
            is_group=is_group,
            chat_name=_chat_name(message),
            sender_name=message.author.display_name,
            is_at_bot=is_group and (named or mentions_bot(message, bot)),
            quoted=quote_text,
            message_id=str(message.id),
            time=message.created_at.astimezone(UTC),
            images=[*images_of(message), *quote_images],
            audio=audio_of(message),
            sender_roles=roles_of(message.guild, message.author) if is_group else [],
            sender_is_bot=bool(message.author.bot),
        )

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        """A button pressed under one of the bot's messages (OutgoingMessage.buttons): its
        custom_id is the text the press sends, as the presser's own message in that chat
        ("/approve K3F9QX"), so a button answers as the command would, with the same checks.
        The interaction is acknowledged at once (deferred); the answer comes as a message."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        text = str(data.get("custom_id") or "")
        user = interaction.user
        if not text or user.bot:
            return
        await self._acknowledge(interaction)
        where = interaction.channel_id or (
            interaction.message.channel.id if interaction.message is not None else None
        )
        if where is None and interaction.guild_id is not None:
            return
        chat = chat_id_in(interaction.guild_id, interaction.channel, where or 0, user.id)
        ident = f"i{interaction.id}"
        self.inbound.message(chat, ident, lambda: self._pressed(interaction, chat, text))

    async def _acknowledge(self, interaction: discord.Interaction) -> None:
        """Tell Discord the press was taken (callback type 6, DEFERRED_UPDATE_MESSAGE: the
        button stops spinning, the message stays). Through the client's own HTTP, which goes
        to `api_base` (discord.py's `interaction.response` would go to discord.com)."""
        assert self.client is not None
        route = discord.http.Route(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            interaction_id=interaction.id,
            interaction_token=interaction.token,
        )
        try:
            await self.client.http.request(route, json={"type": 6})
        except (*_NETWORK, discord.HTTPException) as exc:
            logger.warning("Discord interaction {} not acknowledged: {!r}", interaction.id, exc)

    async def _pressed(
        self, interaction: discord.Interaction, chat_id: str, text: str
    ) -> IncomingMessage | None:
        user, is_group = interaction.user, not chat_id.startswith("dm:")
        roles = roles_of(interaction.guild, user)
        ident, name = f"i{interaction.id}", user.display_name
        return press_message(self, chat_id, is_group, str(user.id), text, ident, name, roles)

    async def _member_joined(self, member: discord.Member) -> None:
        client = self.client
        if client is None or (client.user is not None and member.id == client.user.id):
            return
        guild = member.guild
        where = guild.system_channel
        if where is None:
            logger.info(
                "Discord: {} joined {} ({}), which has no system channel: no welcome",
                member,
                guild.name,
                guild.id,
            )
            return
        chat_id = f"guild:{guild.id}/channel:{where.id}"

        async def welcome() -> list[SystemEvent]:
            name, data = member.display_name, {"guild_id": str(guild.id), "bot": member.bot}
            return [kit.member_joined(self.platform, chat_id, str(member.id), name, **data)]

        # In the channel's queue: the welcome goes out before the answer to a first message.
        self.inbound.events(chat_id, welcome)

    # -- outgoing: DiscordSender ------------------------------------------------------------
    async def messageable(self, target: Target) -> discord.abc.Messageable:
        assert self.client is not None
        if target.dm_user is not None:
            return await self.client.create_dm(discord.Object(target.dm_user))
        assert target.channel_id is not None
        cached = self.client.get_channel(target.channel_id)
        if isinstance(cached, discord.abc.Messageable):
            return cached
        return self.client.get_partial_messageable(target.channel_id, guild_id=target.guild_id)

    async def history(
        self, chat_id: str, after: datetime, limit: int
    ) -> AsyncIterator[discord.Message]:
        """Up to `limit` messages of a chat since `after`, oldest first (none for a chat id
        that is not this channel's): what `catch_up` and `find_sent` read."""
        target = target_of(chat_id)
        if target is None:
            return
        where = await self.messageable(target)
        async for seen in where.history(limit=limit, after=after, oldest_first=True):
            yield seen

    async def find_sent(self, owed: list[tuple[OutgoingMessage, datetime]]) -> dict[int, bool]:
        """Rows owed from before this start (the bot died between Discord taking a message
        and the outbox marking it): True where the chat holds a message of the bot with the
        row's first part since the row was made (beyond the few minutes Discord keeps nonces),
        False otherwise. One history read (up to 100 messages) per chat; chats whose history
        cannot be read now are left out (asked again later): chatfn/channels/kit/sent.py."""
        if self.client is None or self.client.user is None:
            return {}
        me = self.client.user.id

        def mine(seen: discord.Message) -> tuple[float, str] | None:
            return (seen.created_at.timestamp(), seen.content) if seen.author.id == me else None

        async def own(chat_id: str, since: datetime) -> list[tuple[float, str]] | None:
            gone, later = (discord.Forbidden, discord.NotFound), (*_NETWORK, discord.HTTPException)
            return await kit_sent.own_since(self.history(chat_id, since, 100), mine, gone, later)

        def first_part(out: OutgoingMessage) -> list[str]:
            parts = parts_of(out, self.cfg.max_message_length)
            return [parts[0].content] if parts else []

        return await kit_sent.find_sent(owed, first_part, own, leeway=5.0)


class DiscordSender(kit.PlatformSender[Target], platform="discord", label="Discord"):
    """The way out: each part one `send` of discord.py (which waits out a 429 and retries a
    5xx itself, with the part's nonce), in the chat's order; `client` is the channel (its
    discord.py client is a new one at each login)."""

    parse_chat = staticmethod(chat_target)

    async def send_parts(self, ref: Target, out: OutgoingMessage, owed: kit.Owed) -> None:
        channel: DiscordChannel = self.client
        if channel.client is None or channel.client.is_closed():
            raise kit.NotDelivered("the Discord channel is not logged in")
        parts = parts_of(out, self.cfg.max_message_length)
        owed.parts = [part.source for part in parts]
        media = _media(out)  # before the first part: a malformed image refuses the message
        where = await self.call(ref.key, lambda: channel.messageable(ref))
        for index, part in enumerate(parts):
            last = media if index == len(parts) - 1 else None
            options = _options(out, where, index, part, last)
            await self.call(ref.key, partial(where.send, part.content or None, **options))
            owed.sent += 1

    def classify(self, exc: Exception, key: str) -> Exception | None:
        """A missing permission (403) or a deleted channel (404) and any other refusal: one
        error line, refused for good; 401, 429 (discord.py gave up waiting), 5xx and the
        network: the message waits in the outbox."""
        if isinstance(exc, discord.HTTPException):
            if exc.status == 401 or exc.status >= 500 or exc.status == 429:
                return self._waits(key, f"{exc.status} {exc.text}")
            why = ""
            if isinstance(exc, discord.Forbidden):
                why = " (the bot lacks a permission there: View Channel, Send Messages, Attach "
                why += "Files, Read Message History)"
            elif isinstance(exc, discord.NotFound):
                why = " (the channel or the message replied to is gone)"
            self.log.error(
                "Discord refused a message to {}: {} {}{}", key, exc.status, exc.text, why
            )
            return kit.DeliveryRefused(str(exc))
        return self._waits(key, repr(exc)) if isinstance(exc, _NETWORK) else None

    def _waits(self, key: str, why: str) -> kit.NotDelivered:
        self.log.warning("message to Discord {} waits in the outbox: {}", key, why)
        return kit.Unreachable(f"Discord: {why}")


#: What the last part carries besides its text: files (name, bytes) and image URLs.
Media = tuple[list[tuple[str, bytes]], list[str]]


def _media(out: OutgoingMessage) -> Media:
    """The images of `out`, a `data:` one as a file, a URL as an embed showing it (anything
    else refused for good: kit.decode_image), and the reply spoken (voice.tts) as an OGG
    file Discord plays inline."""
    files: list[tuple[str, bytes]] = []
    urls: list[str] = []
    for ref in out.images:
        image = kit.decode_image(ref, platform="Discord")
        if isinstance(image, str):
            urls.append(image)
        else:
            files.append((f"image{len(files) + 1}.{kit.image_name(image).split('.')[1]}", image))
    for n, ref in enumerate(out.audio):
        spoken = audio.decode_audio_uri(ref)
        if spoken is not None:
            files.append((f"voice{n + 1}.ogg", spoken[1]))
    return files, urls


def _options(
    out: OutgoingMessage, where: discord.abc.Messageable, index: int, part: Part, last: Media | None
) -> dict[str, Any]:
    """discord.py's `send` options of part `index` of `out`: the mention allowed to ping and
    the reply on the first part, its nonce, the files, embeds and buttons on the `last`."""
    first = index == 0
    options: dict[str, Any] = {
        "allowed_mentions": discord.AllowedMentions(
            everyone=False,
            roles=False,
            users=[discord.Object(int(out.at))] if first and out.at and out.at.isdigit() else False,
            replied_user=bool(out.at),
        )
    }
    if first and out.quote and out.reply_to and out.reply_to.isdigit():
        # Every destination `messageable` gives has an id (a Snowflake).
        assert isinstance(where, discord.abc.Snowflake)
        options["reference"] = discord.MessageReference(
            message_id=int(out.reply_to), channel_id=where.id, fail_if_not_exists=False
        )
    if part.nonce:
        options["nonce"] = part.nonce
    if last is not None:
        files, urls = last
        if files:
            options["files"] = [discord.File(io.BytesIO(d), filename=n) for n, d in files]
        if urls:
            options["embeds"] = [discord.Embed().set_image(url=url) for url in urls]
        if out.buttons:
            options["view"] = _buttons(out.buttons)
    return options


def _buttons(buttons: list[tuple[str, str]]) -> discord.ui.View:
    """OutgoingMessage.buttons as one row of buttons whose custom_id is the text a press sends
    (at most 100 characters: a longer one gets no button; the message says it anyway)."""
    view = discord.ui.View(timeout=None)
    for index, (label, data) in enumerate(buttons):
        if len(data) <= 100:
            style = discord.ButtonStyle.success if index == 0 else discord.ButtonStyle.secondary
            view.add_item(discord.ui.Button(label=label[:80], custom_id=data, style=style))
    return view


def _ident(message: discord.Message) -> str:
    return str(message.id)


def _chat_name(message: discord.Message) -> str:
    channel = message.channel
    name = getattr(channel, "name", None)
    if message.guild is not None and name:
        return f"{message.guild.name} #{name}"[:128]
    return ""
