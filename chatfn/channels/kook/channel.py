"""The KOOK channel: a KOOK bot in guild text channels and direct messages, through KOOK's
WebSocket gateway (gateway.py: compression, ping/pong, resume, reconnect) and its HTTP API
(api.py) with aiohttp. KOOK publishes no Python SDK; the protocol is small.

- connect: `GET /v3/user/me` (who the bot is; 401: the token is refused, one line naming
  `channels.kook.token`);
- serve: the gateway; events (`s: 0`) in `sn` order, each message once (its `msg_id`);
- in: text (1), KMarkdown (9) and image (2) messages of users (bots' own are skipped), the
  quoted message (`extra.quote`) as the quote, images downloaded through the one fetch door
  (chatfn.common.fetch; KOOK's own asset host and `api_base`'s are let through);
  `joined_guild` system events to the kit's member-joined, welcomed in the guild's welcome
  channel (or its default channel, /v3/guild/view);
- out: send.py; `find_sent` reads a chat's history (/v3/message/list,
  /v3/direct-message/list) for rows a crash left unmarked.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from chatfn.channels import kit
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.gateway_channel import GatewayChannel
from chatfn.channels.kit.media import image_uri, voice_uri
from chatfn.channels.kook.api import ERRORS, KookApi
from chatfn.channels.kook.gateway import Gateway
from chatfn.channels.kook.parse import ADMINISTRATOR, ChatRef, parse_chat_id, read_text, roles_of
from chatfn.channels.kook.send import KookSender, parts_of
from chatfn.channels.kook.settings import KookSettings
from chatfn.channels.kook.state import SessionStore
from chatfn.common.fetch import FetchError, fetch
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.common.payload import object_at
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["KookChannel"]

#: What an operator does when KOOK refuses the token.
FIX = "copy the bot's token from developer.kookapp.cn -> Applications -> your bot -> Bot"
#: KOOK's own hosts of users' images (the asset CDN).
KOOK_ASSET_HOSTS = ("img.kookapp.cn", "img.kaiheila.cn", "*.kookapp.cn", "*.kaiheila.cn")


class _Allow:
    """`bot.fetch` plus KOOK's asset hosts and `api_base`'s host: images KOOK serves."""

    def __init__(self, base: Any, api_base: str) -> None:
        host = urlsplit(api_base).hostname or ""
        self.allow_hosts = [*getattr(base, "allow_hosts", ()), *KOOK_ASSET_HOSTS, host]
        self.allow_networks = list(getattr(base, "allow_networks", ()))


class KookChannel(GatewayChannel, kit.PlatformChannel[KookSettings], platform="kook", label="KOOK"):
    def __init__(self, host: ChannelHost, settings: KookSettings) -> None:
        super().__init__(host, settings)
        self.bot_id = ""
        self.bot_name = ""
        self.api: KookApi | None = None
        self.sender: KookSender | None = None
        self.gateway: Gateway | None = None
        base = getattr(getattr(getattr(host, "settings", None), "bot", None), "fetch", None)
        self.fetch_allow = _Allow(base, settings.api_base)
        self._guilds: dict[str, tuple[float, dict[str, Any], set[str]]] = {}
        self.store: SessionStore | None = None

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        if self._http is None:
            self._http = aiohttp.ClientSession()
            self.api = KookApi(self.cfg, self._http)
            self.sender = KookSender(self.api, self.cfg, self.policy)
            self.sender.fetch_allow = self.fetch_allow
        assert self.api is not None
        with ERRORS.connecting("GET /v3/user/me", self.cfg.api_base, FIX):
            me = await self.api.call("GET", "/v3/user/me")
        me = me if isinstance(me, dict) else {}
        self.bot_id = str(me.get("id") or "")
        self.bot_name = str(me.get("username") or "")
        return f"bot {self.bot_name} ({self.bot_id}) at {self.cfg.api_base}"

    async def serve(self) -> None:
        assert self.api is not None and self._http is not None
        if self.gateway is None:
            self.gateway = Gateway(self.api, self.cfg, self._http, self._on_event, self)
            self.store = SessionStore(self.cfg.state_path, self.bot_id)
            kept = self.store.load()
            if kept is not None:
                self.log.info("KOOK: resuming session {} after sn {}", *kept)
                self.gateway.resume_from(*kept)
            self.gateway.keep = self.store.keep
        await self.gateway.run()

    async def settle(self) -> None:
        """The session and sequence number kept on disk once the gateway is closed."""
        if self.store is not None:
            await self.store.flush()

    # -- events --------------------------------------------------------------------------------
    def _on_event(self, d: dict[str, Any]) -> kit.Taken | None:
        """An event of the gateway: a message or a member's joining queued, its Taken (the
        gateway confirms its `sn` once it settles: stored); None for what needs nothing."""
        msg_id = str(d.get("msg_id") or "")
        extra = object_at(d, "extra")
        if not msg_id:
            return None
        if d.get("type") == 255:
            if extra.get("type") != "joined_guild" or d.get("channel_type") != "GROUP":
                return None
            guild = str(d.get("target_id") or "")

            def welcome(previous: kit.Taken | None) -> kit.Taken:
                taken = kit.Taken(previous)
                read = lambda: self._member_joined(guild, extra)  # noqa: E731
                self.inbound.events(f"guild:{guild}", read, taken)
                return taken

            return self.inbound.once(f"message:{msg_id}", welcome)
        ref = self._chat_of(d, extra)
        if ref is None:
            return None

        read = lambda: self._incoming(ref, d)  # noqa: E731
        return self.inbound.message_once(ref.key, msg_id, read, f"message:{msg_id}")

    def _chat_of(self, d: dict[str, Any], extra: dict[str, Any]) -> ChatRef | None:
        """The chat of a user's text, KMarkdown, image or audio message; None for anything
        else (the bot's own, system, video, file, cards; other bots' come marked)."""
        author_id = str(d.get("author_id") or "")
        if not author_id or author_id == self.bot_id or author_id == "1":
            return None  # other bots' come marked (sender_is_bot), answered where a chats:
            # rule sets answer_bots (README, "Loop guard")
        if d.get("type") not in (1, 2, 8, 9):  # text, image, audio, KMarkdown
            return None
        if d.get("channel_type") == "GROUP":
            target = str(d.get("target_id") or "")
            return ChatRef(True, target) if target else None
        if d.get("channel_type") == "PERSON":
            return ChatRef(False, author_id)
        return None

    async def _incoming(self, ref: ChatRef, d: dict[str, Any]) -> IncomingMessage | None:
        extra = object_at(d, "extra")
        author = object_at(extra, "author")
        sender = str(d["author_id"])
        kind = int(d.get("type") or 0)
        images: list[str] = []
        voices: list[str] = []
        text, mentioned = "", False
        if kind == 2:
            data = await self._file(str(d.get("content") or ""), "image")
            images = [uri] if data and (uri := image_uri(data)) else []
        elif kind == 8:  # a voice message: its file on KOOK's asset CDN, for voice.stt
            data = await self._file(str(d.get("content") or ""), "voice")
            voices = [uri] if data and (uri := voice_uri(data)) else []
        else:
            text, mentioned = read_text(str(d.get("content") or ""), kind, extra, self.bot_id)
        quote = object_at(extra, "quote")
        quoted = None
        if quote:
            quoted, _ = read_text(str(quote.get("content") or ""), 9, {}, self.bot_id)
            quoted = quoted or None
        roles: list[str] = []
        guild = str(extra.get("guild_id") or "")
        if ref.is_group and guild:
            roles = await self._roles(guild, sender, author.get("roles") or [])
        return self.incoming(
            ref,
            sender,
            text,
            sender_name=str(author.get("nickname") or author.get("username") or sender),
            chat_name=str(extra.get("channel_name") or ""),
            is_at_bot=mentioned,
            quoted=quoted,
            images=images,
            audio=voices,
            message_id=str(d["msg_id"]),
            time=kit.sent_at(d.get("msg_timestamp"), ms=True),
            sender_roles=roles,
            sender_is_bot=bool(author.get("bot")),
        )

    async def _file(self, url: str, what: str) -> bytes | None:
        """A file a user sent (its URL on KOOK's asset CDN), within the bot's fetch bounds;
        a failed download is one warning (kit/downloads.py)."""
        if not url.startswith(("https://", "http://")):
            return None

        async def get() -> bytes:
            allow, most = self.fetch_allow, kit.MAX_IMAGE_IN
            return (await fetch(url, allow=allow, max_bytes=most, timeout=30)).data

        return await downloaded(f"KOOK {what}", (FetchError,), get, log=self.log)

    async def _guild(self, guild: str) -> tuple[dict[str, Any], set[str]]:
        """The guild (/v3/guild/view) and its administrator roles (/v3/guild-role/list),
        kept `roles_ttl` seconds."""
        cached = self._guilds.get(guild)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1], cached[2]
        assert self.api is not None
        view = await self.api.call("GET", "/v3/guild/view", params={"guild_id": guild})
        found = await self.api.call(
            "GET", "/v3/guild-role/list", params={"guild_id": guild, "page_size": 100}
        )
        items = found.get("items") if isinstance(found, dict) else found
        admins = {
            str(r.get("role_id"))
            for r in items or []
            if isinstance(r, dict) and int(r.get("permissions") or 0) & ADMINISTRATOR
        }
        view = view if isinstance(view, dict) else {}
        self._guilds[guild] = (time.monotonic() + self.cfg.roles_ttl, view, admins)
        return view, admins

    async def _roles(self, guild: str, user: str, role_ids: list[Any]) -> list[str]:
        try:
            view, admins = await self._guild(guild)
        except ERRORS.every as exc:
            self.log.warning("KOOK: the roles of guild {} not read ({})", guild, exc)
            return []
        return roles_of(user, list(role_ids), str(view.get("user_id") or ""), admins)

    async def _member_joined(self, guild: str, extra: dict[str, Any]) -> list[SystemEvent]:
        body = object_at(extra, "body")
        user = str(body.get("user_id") or "")
        if not user or user == self.bot_id:
            return []
        try:
            view, _ = await self._guild(guild)
        except ERRORS.every as exc:
            self.log.warning("KOOK: guild {} not read for a welcome ({})", guild, exc)
            return []
        # "0" (or nothing): the guild has no welcome channel set
        found = [str(view.get(k) or "") for k in ("welcome_channel_id", "default_channel_id")]
        channel = next((c for c in found if c not in ("", "0")), "")
        if not channel:
            self.log.info("KOOK: member {} joined guild {}, which has no channel", user, guild)
            return []
        name = await self._user_name(user, guild)
        return [kit.member_joined(self.platform, f"group:{channel}", user, name, guild_id=guild)]

    async def _user_name(self, user: str, guild: str) -> str:
        assert self.api is not None
        try:
            found = await self.api.call(
                "GET", "/v3/user/view", params={"user_id": user, "guild_id": guild}
            )
        except ERRORS.every:
            return user
        found = found if isinstance(found, dict) else {}
        return str(found.get("nickname") or found.get("username") or user)

    # -- never twice ---------------------------------------------------------------------------
    async def find_sent(self, owed: list[tuple[OutgoingMessage, datetime]]) -> dict[int, bool]:
        """Rows owed from before this start: True where the chat's history holds a message of
        the bot with the row's first part since the row was made, False where it does not;
        chats whose history cannot be read now are left out (asked again later)."""
        by_chat: dict[str, list[tuple[OutgoingMessage, datetime]]] = {}
        for out, created in owed:
            if out.event_id is not None:
                by_chat.setdefault(out.chat_id, []).append((out, created))
        verdicts: dict[int, bool] = {}
        for chat_id, rows in by_chat.items():
            try:
                ref = parse_chat_id(chat_id)
                mine = await self._history(ref)
            except ValueError:
                verdicts |= {o.event_id: False for o, _ in rows if o.event_id is not None}
                continue
            except ERRORS.every as exc:
                self.log.info("KOOK: history of {} not read ({})", chat_id, exc)
                continue
            for out, created in rows:
                assert out.event_id is not None
                parts = parts_of(out, ref, self.cfg.max_message_length)
                after = (created - timedelta(seconds=5)).timestamp() * 1000
                verdicts[out.event_id] = bool(parts) and any(
                    content == parts[0].content and at >= after for content, at in mine
                )
        return verdicts

    async def _history(self, ref: ChatRef) -> list[tuple[str, float]]:
        """The bot's recent messages in a chat: (content, sent at in ms)."""
        assert self.api is not None
        path = "/v3/message/list" if ref.is_group else "/v3/direct-message/list"
        found = await self.api.call("GET", path, params={"target_id": ref.target, "page_size": 50})
        items = found.get("items") if isinstance(found, dict) else found
        mine: list[tuple[str, float]] = []
        for item in items or []:
            if not isinstance(item, dict):
                continue
            author = item.get("author_id") or object_at(item, "author").get("id")
            if str(author or "") == self.bot_id:
                mine.append((str(item.get("content") or ""), float(item.get("create_at") or 0)))
        return mine
