"""Personal WeChat through Tencent's iLink bot API, on the channel kit.

- connect: the token (`channels.weixin.token`, else the login `chatfn login weixin` stored in
  the database, with the API host it named) and `msg/notifystart`, which a token iLink no
  longer takes answers with -14: one error line naming the key and the command, the channel
  down, a try every minute (a new login is picked up without a restart).
- serve: `getupdates` long polls with the cursor (`get_updates_buf`). Each answer's messages
  are taken in their chats' order; the cursor kept in the database advances to an answer's
  only once every message of it (and of the answers before) is stored, so a restart asks
  iLink again from the last stored position and what was read but not stored comes again
  (messages seen before are skipped by their id). A message whose handling failed before it
  was stored rewinds the poll to that position (taken again, at most three times).
- out: send.py; images in and out: media.py.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from chatfn.channels import kit
from chatfn.channels.intake import RETAKE_AFTER
from chatfn.channels.weixin.api import IlinkApi, IlinkError
from chatfn.channels.weixin.media import decrypt, download_url, media_key
from chatfn.channels.weixin.parse import ChatRef, Parsed, parse_message
from chatfn.channels.weixin.send import WeixinSender, expired
from chatfn.channels.weixin.settings import WeixinSettings
from chatfn.channels.weixin.state import LOGIN, Login, context_key, cursor_key
from chatfn.common import audio
from chatfn.common.fetch import FetchTooLarge, read_limited
from chatfn.common.messages import IncomingMessage

__all__ = ["WeixinChannel"]


class WeixinChannel(kit.PlatformChannel[WeixinSettings], platform="weixin", label="WeChat"):
    """The WeChat channel (module docstring)."""

    sender: WeixinSender | None

    def __init__(self, host: Any, settings: WeixinSettings) -> None:
        super().__init__(host, settings)
        self.session: aiohttp.ClientSession | None = None
        self.api: IlinkApi | None = None
        self.bot = ""
        self.read_buf = ""  # the cursor of the next getupdates
        self.stored_buf = ""  # the cursor up to which every message is stored (kept)
        self.poll_timeout = settings.poll_timeout
        self.contexts: dict[str, str] = {}
        self._last_batch: asyncio.Future[bool] | None = None
        self._rewind = False
        self._generation = 0  # bumped by a rewind: what was read before it keeps nothing
        self._tickets: dict[str, tuple[str, float]] = {}

    # -- what is kept ----------------------------------------------------------------------
    async def load(self, key: str) -> str | None:
        return await self.host.load_state(self.platform, key)

    async def save(self, key: str, value: str | None) -> None:
        await self.host.save_state(self.platform, key, value)

    async def credentials(self) -> tuple[str, str, str]:
        """(token, base URL, bot id): the config's token, else the stored login."""
        if token := self.cfg.token_value():
            return token, self.cfg.base_url, ""
        login = Login.loads(await self.load(LOGIN))
        if login is None or not login.token:
            raise kit.CredentialsRefused(
                "WeChat: no login (run `chatfn login weixin` and scan the QR code, or set "
                "channels.weixin.token)"
            )
        return login.token, login.base_url or self.cfg.base_url, login.bot_id

    # -- connect and serve -----------------------------------------------------------------
    async def connect(self) -> str:
        token, base_url, bot = await self.credentials()
        if self.session is None:
            self.session = aiohttp.ClientSession()
        self.api = IlinkApi(self.session, base_url, token)
        try:
            await self.api.post("msg/notifystart", {}, timeout=15)
        except IlinkError as exc:
            if exc.expired:
                raise expired(exc) from None
            if exc.rate_limited or exc.status >= 500:
                raise kit.Unreachable(f"WeChat (iLink) at {base_url} failed ({exc})") from None
            self.log.debug("WeChat notifystart: {}", exc)  # not every iLink host has it
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise kit.Unreachable(f"WeChat (iLink) not reachable at {base_url} ({exc})") from None
        key = bot or base64.urlsafe_b64encode(token.encode()[-12:]).decode()
        if key != self.bot:
            self.bot = key
            self.stored_buf = self.read_buf = await self.load(cursor_key(key)) or ""
        self.sender = WeixinSender(self.api, self.cfg, self.policy, self.context)
        return f"bot {bot or '(token from the config)'}, long polling {base_url}"

    async def serve(self) -> None:
        self.up()
        await self.serve_polls(self.fetch, self.take, kit.Backoff(1.0, 60.0))

    async def fetch(self) -> dict[str, Any]:
        """One getupdates (after a rewind's pause, from the kept cursor); its failures as the
        kit's errors."""
        if self._rewind:
            self._rewind = False
            self._generation += 1
            self._last_batch = None
            if not await self.pause(RETAKE_AFTER):
                return {}
            self.read_buf = self.stored_buf
        try:
            return await self.poll()
        except IlinkError as exc:
            if exc.expired:
                raise expired(exc) from None
            raise kit.Unreachable(f"WeChat getupdates: {exc}") from None
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise kit.Unreachable(f"WeChat (iLink) not reachable ({exc})") from None

    async def poll(self) -> dict[str, Any]:
        assert self.api is not None
        try:
            answer: dict[str, Any] = await self.api.post(
                "getupdates", {"get_updates_buf": self.read_buf}, timeout=self.poll_timeout + 5
            )
        except TimeoutError:  # the long poll's normal end
            return {}
        suggested = answer.get("longpolling_timeout_ms")
        if isinstance(suggested, int) and 1000 <= suggested <= 120_000:
            self.poll_timeout = suggested / 1000
        return answer

    def take(self, answer: dict[str, Any]) -> None:
        """Queue an answer's messages; its cursor is kept once they are all stored."""
        buf = answer.get("get_updates_buf")
        takes: list[kit.Taken] = []
        for raw in answer.get("msgs") or []:
            parsed = parse_message(raw)
            if parsed is None:
                continue
            if parsed.context_token:
                self.remember_context(parsed.chat, parsed.context_token)
            takes.append(self.queue(parsed))
        if isinstance(buf, str) and buf and buf != self.read_buf:
            self.read_buf = buf
            batch = self.confirm(self._last_batch, buf, takes, self._generation)
            self._last_batch = self.spawn(batch)

    def queue(self, parsed: Parsed) -> kit.Taken:
        chat = parsed.chat.key
        ident = parsed.message_id
        key = (chat, ident) if ident else (chat, object())

        return self.inbound.message_once(chat, ident, lambda: self.read(parsed), key)

    async def confirm(
        self, previous: Awaitable[bool] | None, buf: str, takes: list[kit.Taken], generation: int
    ) -> bool:
        """Keep `buf` once the answers before it and its messages are stored; a message
        released (not stored) rewinds the poll to the kept cursor instead."""
        if previous is not None and not await previous:
            return False
        outcomes = await asyncio.gather(*(t.outcome for t in takes))
        if generation != self._generation:  # read before a rewind: read again since
            return False
        if not all(outcomes):
            self._rewind = True
            return False
        self.stored_buf = buf
        await self.save(cursor_key(self.bot), buf)
        return True

    # -- in --------------------------------------------------------------------------------
    def remember_context(self, chat: ChatRef, token: str) -> None:
        if self.contexts.get(chat.key) != token:
            self.contexts[chat.key] = token
            self.spawn(self.save(context_key(chat.key), token))

    async def context(self, chat: ChatRef) -> str | None:
        token = self.contexts.get(chat.key)
        if token is None:
            token = await self.load(context_key(chat.key))
            if token:
                self.contexts[chat.key] = token
        return token

    async def read(self, parsed: Parsed) -> IncomingMessage | None:
        text, at_bot = self.without_mention(parsed)
        images = [uri for item in parsed.images if (uri := await self.image(item))]
        voices = [uri for item in parsed.voices if (uri := await self.voice(item))]
        if not parsed.chat.is_group and parsed.context_token:
            self.spawn(self.typing(parsed.sender, parsed.context_token))
        return self.incoming(
            parsed.chat.key,
            parsed.sender,
            text,
            sender_name=parsed.sender.split("@")[0],  # iLink gives no nickname
            is_group=parsed.chat.is_group,
            is_at_bot=at_bot,
            quoted=parsed.quoted,
            images=images,
            audio=voices,
            transcript=parsed.transcript,
            message_id=parsed.message_id,
            time=kit.sent_at(parsed.time_ms, ms=True),
        )

    def without_mention(self, parsed: Parsed) -> tuple[str, bool]:
        """A group message's text without `@<bot.name>` (iLink's message model has no mention
        field: the name as WeChat writes it), and whether it was there; private: True."""
        if not parsed.chat.is_group:
            return parsed.text, True
        name = f"@{self.host.settings.bot.name}"
        if name not in parsed.text:
            return parsed.text, False
        return " ".join(parsed.text.replace(name, " ").split()), True

    async def image(self, item: dict[str, Any]) -> str | None:
        """An image item from the CDN, decrypted, as a data URI; None with a warning."""
        plain = await self._cdn(item.get("image_item") or {}, "image")
        return kit.data_uri(plain) if plain is not None else None

    async def voice(self, item: dict[str, Any]) -> str | None:
        """A voice item (SILK) from the CDN, decrypted, as an audio data URI for voice.stt."""
        plain = await self._cdn(item.get("voice_item") or {}, "voice")
        if plain is None:
            return None
        return kit.data_uri(plain, audio.audio_mime(plain))

    async def _cdn(self, found: Any, what: str) -> bytes | None:
        """An image or voice item's file from the CDN (only from its hosts), decrypted; None
        with a warning when it cannot be had or is too large."""
        media = found.get("media") if isinstance(found, dict) else None
        if not isinstance(media, dict) or self.session is None:
            return None
        url = download_url(media, self.cfg.cdn_base_url)
        key = media_key(found, media)
        if url is None or urlsplit(url).netloc not in self.media_hosts():
            url = download_url({**media, "full_url": ""}, self.cfg.cdn_base_url)
        if url is None:
            return None
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as got:
                got.raise_for_status()
                data = await read_limited(got, kit.MAX_IMAGE_IN * 2)
            plain = decrypt(data, key) if key else data
        except (aiohttp.ClientError, TimeoutError, FetchTooLarge, ValueError) as exc:
            self.log.warning("WeChat {} not downloaded: {}", what, exc)
            return None
        if len(plain) > kit.MAX_IMAGE_IN:
            self.log.warning("WeChat {} of {} bytes not taken: too large", what, len(plain))
            return None
        return plain

    def media_hosts(self) -> set[str]:
        """The hosts a message's `full_url` may name (the CDN's, iLink's): any other is not
        fetched (the download parameter is used with the configured CDN instead)."""
        bases = (self.cfg.cdn_base_url, self.api.base_url if self.api else self.cfg.base_url)
        return {urlsplit(b).netloc for b in bases}

    async def typing(self, user: str, context_token: str) -> None:
        """Show "typing" while the answer is made (getconfig's typing_ticket, sendtyping);
        a failure is a debug line."""
        if self.api is None:
            return
        try:
            ticket, since = self._tickets.get(user, ("", 0.0))
            if not ticket or time.monotonic() - since > 600:
                answer = await self.api.post(
                    "getconfig", {"ilink_user_id": user, "context_token": context_token}
                )
                ticket = str(answer.get("typing_ticket") or "")
                self._tickets[user] = (ticket, time.monotonic())
            if ticket:
                body = {"ilink_user_id": user, "typing_ticket": ticket, "status": 1}
                await self.api.post("sendtyping", body, timeout=10)
        except (IlinkError, aiohttp.ClientError, TimeoutError) as exc:
            self.log.debug("WeChat typing: {}", exc)

    async def close(self) -> None:
        if self.api is not None and self.logged_in:
            try:
                await self.api.post("msg/notifystop", {}, timeout=5)
            except (IlinkError, aiohttp.ClientError, TimeoutError) as exc:
                self.log.debug("WeChat notifystop: {}", exc)
        if self.session is not None:
            await self.quietly(self.session.close())
            self.session = None
