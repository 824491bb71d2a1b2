"""The Matrix channel: a Matrix account (a bot user on any homeserver) through the
client-server API, with matrix-nio's AsyncClient for the calls and for the rooms' state
(members, display names, power levels), and this module for the sync loop, so that messages
go through the bot's outbox and per-room order like on every channel (nio's `sync_forever`
would retry with fixed waits, not persist its position, and hand events to callbacks
without order per room).

- Login: `access_token` (checked with /account/whoami), or `password` (m.login.password with
  `device_id`; the token it gives is kept in `store_path` and used again next time). A token
  the homeserver refuses is one error line, then a retry each minute.
- Sync: /sync long polls from the stored position. The first sync of a run asks for the full
  state (so the rooms' members and power levels are known after a restart), the first sync of
  an account ever only takes the position: history from before the bot's first run is not
  answered. The position is stored once every message before it has been handled, so a
  crash re-reads what was not handled (a message already stored is skipped: its event id is
  the message id) and never loses what came while the bot was down; a room whose timeline
  the sync cut short (`limited`) is read back to the stored position with /messages. A sync
  that fails (network, 5xx, 429) is tried again with backoff, and the outbox is kicked once
  it works again; a token refused while syncing goes back to logging in (the kit's slow
  retry: a kept token that expired is replaced by a password login).
- Invites: joined (`autojoin`), a DM invite (`is_direct`) recorded in the account's
  `m.direct`, as clients do, so it stays a DM after restarts (chat ids: parse.py).
- Messages: `m.text`, `m.emote` and `m.image` from others (`m.notice` is what bots send:
  not answered, so two bots do not talk in a loop); edits are not answered again; encrypted
  rooms are named once in the log and not read (no end-to-end encryption here).
- Images: `m.image` media is downloaded with the access token from the authenticated media
  API (`/_matrix/client/v1/media/download/{server}/{mediaId}`, Matrix 1.11), or from the
  legacy `/_matrix/media/v3/download/...` when the server does not have it (404/405
  M_UNRECOGNIZED), and handed on as a data URI (the mxc:// URI needs the token).
- Roles for `bot.trust_group_admins`: the sender's power level in the room (m.room.power_levels):
  100 and more "owner", 50 and more "admin"; in room versions whose creators are above power
  levels (12 and later) the creators are "owner".
- Member joined: an `m.room.member` join of someone else (not a display-name change) in a
  group room reaches the welcome built-in.

The way out: send.py (transaction ids from the outbox row: never twice).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import aiohttp
from loguru import logger
from nio import ErrorResponse, RoomGetEventResponse, RoomMessagesResponse, SyncResponse

from chatfn.channels import kit
from chatfn.channels.kit.checkpoint import Checkpoint
from chatfn.channels.matrix.login import login, make_client
from chatfn.channels.matrix.media import download
from chatfn.channels.matrix.parse import ChatRef, read_content
from chatfn.channels.matrix.send import MatrixSender
from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.channels.matrix.store import SyncStore
from chatfn.common.messages import (
    IncomingMessage,
    SystemEvent,
)
from chatfn.common.payload import object_at
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["MatrixChannel", "make_client"]

_ANSWERED = {"m.text", "m.emote", "m.image", "m.audio"}
MAX_AUDIO_BYTES = 20 * 1024 * 1024  # a voice message downloaded at most (voice.stt)
_CATCH_UP_PAGES = 20
_NETWORK = (aiohttp.ClientError, TimeoutError, OSError)


def sync_filter(timeline_limit: int) -> dict[str, Any]:
    """What the bot needs of a sync: room state and timelines, its own `m.direct`; no
    presence, typing or receipts. Members are not lazy-loaded (DMs and roles need them)."""
    return {
        "presence": {"types": []},
        "account_data": {"types": ["m.direct"]},
        "room": {
            "ephemeral": {"types": []},
            "account_data": {"types": []},
            "timeline": {"limit": timeline_limit},
            "state": {"lazy_load_members": False},
        },
    }


class MatrixChannel(kit.PlatformChannel[MatrixSettings], platform="matrix", label="Matrix"):
    sender: MatrixSender  # made with the channel

    def __init__(self, host: ChannelHost, settings: MatrixSettings) -> None:
        super().__init__(host, settings)
        self.user_id = settings.user_id or ""
        self.client = make_client(settings)
        self.store = SyncStore(settings.store_path, self.user_id)
        self.sender = MatrixSender(
            self.client,
            settings,
            name_of=self._name_of,
            encrypted=self._encrypted,
            fetch_allow=host.settings.bot.fetch,
            policy=self.policy,
        )
        self.display_name = ""
        self._direct: dict[str, list[str]] = {}  # m.direct: user id -> DM room ids
        self._loaded = False
        self.checkpoint = Checkpoint(lambda since: self.store.save(since=since))
        self._warned_encrypted: set[str] = set()
        self._joining: set[str] = set()
        self._creators: dict[str, set[str]] = {}  # room -> creators above power levels (v12+)
        self.syncs = 0  # successful syncs (tests, health)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """whoami with the token (configured, or kept from a password login), or a password
        login (login.py): who the bot is, on which device."""
        if not self._loaded:
            await asyncio.to_thread(self.store.load)
            self._loaded = True
        try:
            said = await login(self.client, self.cfg, self.store)
        except _NETWORK as exc:
            raise kit.Unreachable(
                f"Matrix homeserver not reachable at {self.cfg.homeserver} ({exc!r})"
            ) from None
        try:
            got = await self.client.get_displayname(self.user_id)
            self.display_name = str(getattr(got, "displayname", "") or "")
        except _NETWORK as exc:
            logger.debug("Matrix: own display name not read: {!r}", exc)
        return said

    async def close(self) -> None:
        try:  # the position of what was handled is kept
            await self.checkpoint.flush()
        except Exception as exc:  # noqa: BLE001 - stopping: logged, nothing more to do
            logger.warning("Matrix: the sync position was not saved: {!r}", exc)
        await self.quietly(self.client.close())

    # -- sync ----------------------------------------------------------------------------------
    async def serve(self) -> None:
        since = self.store.since
        first_ever = since is None
        full_state = True
        filt = sync_filter(self.cfg.timeline_limit)

        async def sync() -> None:
            """One sync, its events handled; its failures as the kit's errors."""
            nonlocal since, first_ever, full_state
            try:
                response = await self.client.sync(
                    timeout=0 if full_state else int(self.cfg.sync_timeout * 1000),
                    sync_filter=filt,
                    since=since,
                    full_state=True if full_state and since else None,
                )
            except _NETWORK as exc:
                raise kit.Unreachable(f"Matrix sync failed ({exc!r})") from None
            if isinstance(response, SyncResponse):
                await self._on_sync(response, since if not first_ever else None)
                since = response.next_batch
                first_ever = full_state = False
                self.syncs += 1
                return
            code = str(getattr(response, "status_code", "") or "")
            why = f"{code}: {getattr(response, 'message', response)}"
            if code == "M_LIMIT_EXCEEDED" and getattr(response, "retry_after_ms", None):
                raise kit.RateLimited(why, response.retry_after_ms / 1000)
            if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
                raise kit.CredentialsRefused(
                    f"Matrix refused the access token of {self.user_id} during sync "
                    f"({why}): log in again"
                )
            raise kit.Unreachable(f"Matrix sync failed ({why})")

        await self.serve_polls(sync)

    async def _on_sync(self, response: SyncResponse, since: str | None) -> None:
        """One sync's events. `since` None: the account's first sync ever (only state and
        invites are taken, no message is answered)."""
        self._read_state(response)
        batch: list[asyncio.Future[Any]] = []
        if since is not None:
            for room_id, info in response.rooms.join.items():
                for source in await self._new_events(room_id, info, since):
                    task = self._event(room_id, source)
                    if task is not None:
                        batch.append(task)
        self.checkpoint.after(batch, response.next_batch)  # kit/checkpoint.py

    def _read_state(self, response: SyncResponse) -> None:
        """What a sync says besides messages: direct rooms, invites (accepted when
        `autojoin`), rooms left, and each room's creator."""
        for event in response.account_data_events:
            if getattr(event, "type", "") == "m.direct" and isinstance(event.content, dict):
                self._direct = {
                    str(user): [str(r) for r in rooms]
                    for user, rooms in event.content.items()
                    if isinstance(rooms, list)
                }
        if self.cfg.autojoin:
            for room_id, info in response.rooms.invite.items():
                if room_id not in self._joining:
                    self._joining.add(room_id)
                    self.spawn(self._accept(room_id, info.invite_state))
        for room_id in response.rooms.leave:
            logger.info("Matrix: the bot left or was removed from {}", room_id)
        for room_id, info in response.rooms.join.items():
            for event in [*info.state, *info.timeline.events]:
                if getattr(event, "source", {}).get("type") == "m.room.create":
                    self._note_creators(room_id, event.source)

    async def _new_events(self, room_id: str, info: Any, since: str) -> list[dict[str, Any]]:
        """A joined room's timeline events to handle: what came after the bot's own join, or,
        when the sync cut the timeline short, what was missed before it too."""
        events = [e.source for e in info.timeline.events]
        joined = self._own_join(events)
        if joined is not None:  # what was said before the bot came is history
            return events[joined + 1 :]
        if info.timeline.limited and info.timeline.prev_batch:
            return await self._missed(room_id, info.timeline.prev_batch, since) + events
        return events

    def _own_join(self, events: list[dict[str, Any]]) -> int | None:
        """The index of the bot's own join in a timeline (the last one), if it is there."""
        found = None
        for index, source in enumerate(events):
            if (
                source.get("type") == "m.room.member"
                and source.get("state_key") == self.user_id
                and (source.get("content") or {}).get("membership") == "join"
                and ((source.get("unsigned") or {}).get("prev_content") or {}).get("membership")
                != "join"
            ):
                found = index
        return found

    async def _missed(self, room_id: str, start: str, since: str) -> list[dict[str, Any]]:
        """The events of a room between the stored position and the sync's cut (newest
        first from /messages, returned oldest first)."""
        events: list[dict[str, Any]] = []
        token: str | None = start
        for _ in range(_CATCH_UP_PAGES):
            page = await self.client.room_messages(room_id, start=token, end=since, limit=100)
            if not isinstance(page, RoomMessagesResponse) or not page.chunk:
                break
            events.extend(e.source for e in page.chunk)
            if not page.end or page.end == token:
                break
            token = page.end
        else:
            logger.warning("Matrix room {}: more missed events than read back", room_id)
        events.reverse()
        if events:
            logger.info("Matrix room {}: {} missed events read back", room_id, len(events))
        return events

    # -- rooms ---------------------------------------------------------------------------------
    async def _accept(self, room_id: str, invite_state: list[Any]) -> None:
        inviter, direct = "", False
        for event in invite_state:  # nio's stripped invite events (InviteMemberEvent, ...)
            content = getattr(event, "content", None)
            if getattr(event, "state_key", None) == self.user_id and isinstance(content, dict):
                if content.get("membership") == "invite":
                    inviter = str(getattr(event, "sender", "") or "")
                    direct = bool(content.get("is_direct"))
        try:
            joined = await self.client.join(room_id)
            if isinstance(joined, ErrorResponse):
                logger.warning("Matrix: joining {} failed: {}", room_id, joined.message)
                return
            logger.info(
                "Matrix: joined {} ({}invited by {})", room_id, "DM, " if direct else "", inviter
            )
            if direct and inviter:
                await self._mark_direct(inviter, room_id)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            logger.warning("Matrix: joining {} failed: {!r}", room_id, exc)
        finally:
            self._joining.discard(room_id)

    async def _mark_direct(self, user: str, room_id: str) -> None:
        """Add the room to the account's `m.direct` (what clients do with an is_direct
        invite), so it is a DM after a restart too."""
        rooms = self._direct.setdefault(user, [])
        if room_id not in rooms:
            rooms.append(room_id)
        path = f"/_matrix/client/v3/user/{quote(self.user_id, safe='')}/account_data/m.direct"
        await self._api("PUT", path, self._direct)

    async def _api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A client-server API call nio has no method for: (HTTP status, JSON body)."""
        response = await self.client.send(
            method,
            path,
            json.dumps(body) if body is not None else None,
            {
                "Authorization": f"Bearer {self.client.access_token}",
                "Content-Type": "application/json",
            },
        )
        async with response:
            try:
                return response.status, await response.json(content_type=None)
            except ValueError:
                return response.status, None

    def _note_creators(self, room_id: str, create: dict[str, Any]) -> None:
        """Room versions 12 and later (MSC4289) rank the creators above every power level:
        they are not in m.room.power_levels' users, and are the room's owners."""
        content = object_at(create, "content")
        version = str(content.get("room_version") or "1")
        if version.isdigit() and int(version) < 12:
            return
        creators = {str(create.get("sender") or "")}
        extra = content.get("additional_creators")
        if isinstance(extra, list):
            creators.update(str(u) for u in extra)
        self._creators[room_id] = creators - {""}

    def _is_direct(self, room_id: str) -> bool:
        if any(room_id in rooms for rooms in self._direct.values()):
            return True
        room = self.client.rooms.get(room_id)
        return room is not None and room.member_count == 2

    def ref(self, room_id: str) -> ChatRef:
        return ChatRef(not self._is_direct(room_id), room_id)

    def _encrypted(self, room_id: str) -> bool:
        room = self.client.rooms.get(room_id)
        return bool(room is not None and room.encrypted)

    def _name_of(self, room_id: str, user: str) -> str:
        room = self.client.rooms.get(room_id)
        name = room.user_name(user) if room is not None else None
        return name or user

    def roles(self, room_id: str, user: str) -> list[str]:
        """The sender's standing in the room, from its power levels."""
        room = self.client.rooms.get(room_id)
        if room is None:
            return []
        if user in self._creators.get(room_id, ()):
            return ["owner"]
        level = room.power_levels.get_user_level(user)
        if level >= 100:
            return ["owner"]
        return ["admin"] if level >= 50 else []

    # -- events --------------------------------------------------------------------------------
    def _event(self, room_id: str, source: dict[str, Any]) -> asyncio.Future[None] | None:
        """Queue one timeline event in its room's order; the task, or None when ignored."""
        kind, sender = source.get("type"), str(source.get("sender") or "")
        if not sender or sender == self.user_id:
            return None
        content = source.get("content")
        if not isinstance(content, dict):
            return None
        if kind == "m.room.encrypted":
            if room_id not in self._warned_encrypted:
                self._warned_encrypted.add(room_id)
                logger.warning(
                    "Matrix room {} is encrypted: the channel cannot read it (no end-to-end "
                    "encryption); use an unencrypted room",
                    room_id,
                )
            return None
        if kind == "m.room.message":
            if content.get("msgtype") not in _ANSWERED:
                return None
            relates = content.get("m.relates_to")
            if isinstance(relates, dict) and relates.get("rel_type") == "m.replace":
                return None  # an edit: the first version was answered
            ref = self.ref(room_id)
            ident = str(source.get("event_id") or "")
            return self.inbound.message(ref.key, ident, lambda: self._incoming(ref, source))
        if kind == "m.room.member" and content.get("membership") == "join":
            member = str(source.get("state_key") or "")
            unsigned = object_at(source, "unsigned")
            before = (unsigned.get("prev_content") or {}).get("membership")
            if member and member != self.user_id and before != "join":
                ref = self.ref(room_id)
                if ref.is_group:
                    return self.inbound.events(ref.key, lambda: self._member_joined(ref, source))
        return None

    async def _incoming(self, ref: ChatRef, source: dict[str, Any]) -> IncomingMessage | None:
        event_id, sender = str(source.get("event_id") or ""), str(source["sender"])
        if not event_id:
            return None
        content: dict[str, Any] = source["content"]
        relates = content.get("m.relates_to")
        if isinstance(relates, dict) and relates.get("rel_type") == "m.thread":
            root = relates.get("event_id")
            if isinstance(root, str) and root:
                self.sender.note_thread(event_id, root)
        room = self.client.rooms.get(ref.room_id)
        names = [self.display_name]
        if room is not None:
            names.append(room.user_name(self.user_id) or "")
        reading = read_content(content, self.user_id, names)
        images: list[str] = []
        audio: list[str] = []
        text, msgtype = reading.text, content.get("msgtype")
        if msgtype in ("m.audio", "m.image"):
            # Spec 1.10 captions: `body` is a caption when `filename` is set and differs.
            filename = content.get("filename")
            text = text if isinstance(filename, str) and filename != content.get("body") else ""
        if msgtype == "m.audio":  # a voice message (Element's) or an audio file
            voice = await download(self.client, content, MAX_AUDIO_BYTES, "audio")
            audio = [voice] if voice is not None else []
        elif msgtype == "m.image":
            image = await download(self.client, content, kit.MAX_IMAGE_IN)
            images = [image] if image is not None else []
        elif msgtype == "m.emote":
            text = f"* {text}"
        quoted, mentioned = reading.quoted, reading.mentioned
        if reading.reply_to is not None:
            original = await self._original(ref.room_id, reading.reply_to)
            if original is not None:
                quoted_sender, quoted_text = original
                quoted = quoted_text or quoted
                mentioned = mentioned or quoted_sender == self.user_id
            elif reading.quoted_sender == self.user_id:
                mentioned = True
        if not text.strip() and not images and not audio:  # a quote alone: nothing to answer
            return None
        return self.incoming(
            ref.key,
            sender,
            text,
            is_group=ref.is_group,
            chat_name=room.display_name if room is not None else "",
            sender_name=self._name_of(ref.room_id, sender),
            is_at_bot=mentioned,
            quoted=quoted,
            message_id=event_id,
            time=kit.sent_at(source.get("origin_server_ts"), ms=True),
            images=images,
            audio=audio,
            sender_roles=self.roles(ref.room_id, sender) if ref.is_group else [],
        )

    async def _original(self, room_id: str, event_id: str) -> tuple[str, str] | None:
        """(sender, text) of the message a reply answers, read from the homeserver (the
        reply's own fallback quote is optional since Matrix 1.13)."""
        try:
            got = await self.client.room_get_event(room_id, event_id)
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None
        if not isinstance(got, RoomGetEventResponse):
            return None
        source = got.event.source
        content = object_at(source, "content")
        reading = read_content(content, self.user_id, [])
        return str(source.get("sender") or ""), reading.text

    async def _member_joined(self, ref: ChatRef, source: dict[str, Any]) -> list[SystemEvent]:
        member = str(source.get("state_key") or "")
        content = source.get("content") or {}
        name = content.get("displayname")
        name = name if isinstance(name, str) and name else self._name_of(ref.room_id, member)
        sender = str(source.get("sender") or "")
        by = sender if sender != member else ""
        return [kit.member_joined(self.platform, ref.key, member, name, added_by=by)]
