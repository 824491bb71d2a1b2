"""The Telegram channel: a bot account through the Bot API, with python-telegram-bot's `Bot`
(its typed methods, Update parsing and error classes) driven by this module: the updates loop,
the per-chat order and the delivery rules are chatfn's, not PTB's `Application`, so a message
goes through the bot's outbox like on every channel.

Updates arrive by long polling (`mode: polling`, getUpdates with an offset) or by webhook
(`mode: webhook`: setWebhook to `webhook_url`, whose path is served on the HTTP channel's port,
and every POST must carry `secret_token` in X-Telegram-Bot-Api-Secret-Token). Requests go to
`{base_url}/bot{token}/METHOD`, files come from `{base_url}/file/bot{token}/PATH`.

Nothing lost, handled once: an update is confirmed (the next getUpdates' offset, a webhook POST's
200) only once its message is stored or its job ended (chatfn/channels/intake.py). While an update
waits (its chat's turn is still running), getUpdates keeps the offset below it and is asked
again every `CONFIRM_WAIT` seconds (Telegram hands the unconfirmed updates back at once, with
what is new after them); a webhook POST waits up to `WEBHOOK_WAIT` seconds, then is answered
503 and Telegram sends it again. A process that dies before storing a message gets it again
after its restart; one that stored it and died before confirming it recognises it by its id
among the stored messages (`host.was_stored`) and skips it.

Chat ids, mentions and commands: parse.py. The way out (MarkdownV2, splitting, photos, 429s):
send.py. Group admins (`bot.trust_group_admins`): the sender's getChatMember status, asked for
commands only (`creator` is "owner", `administrator` is "admin"; an anonymous admin, posting as
the group itself, is "admin").
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from loguru import logger
from telegram import Audio, Bot, CallbackQuery, Message, PhotoSize, Update, User, Voice
from telegram.error import Conflict, InvalidToken, TelegramError
from telegram.request import HTTPXRequest

from chatfn.channels import kit
from chatfn.channels.kit import media as kit_media
from chatfn.channels.kit import presses, webhook
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.quotes import quote_line
from chatfn.channels.kit.wire import same_secret
from chatfn.channels.telegram.parse import ChatRef, address, chat_ref
from chatfn.channels.telegram.send import TelegramSender
from chatfn.channels.telegram.settings import TelegramSettings
from chatfn.common.messages import IncomingMessage, SystemEvent, clean_text
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["TelegramChannel"]

# callback_query: a press of an inline keyboard's button (an approval request's Approve/Deny).
ALLOWED_UPDATES = ["message", "callback_query"]
MAX_PHOTO_BYTES = 5 * 1024 * 1024  # what a vision model is given at most (function_calls.images)
MAX_VOICE_BYTES = 20 * 1024 * 1024  # what the Bot API's getFile serves at most
# While a taken update is not yet stored: how long getUpdates waits for it before asking again
# (with the offset below it), and how long a webhook POST waits before a 503.
CONFIRM_WAIT = 0.5
WEBHOOK_WAIT = 20.0
_ROLES = {"creator": "owner", "administrator": "admin"}
_ERRORS = (TelegramError,)
_REFUSED = (
    "Telegram refused channels.telegram.token ({}: unauthorized): check the token @BotFather gave"
)


class TelegramChannel(kit.PlatformChannel[TelegramSettings], platform="telegram", label="Telegram"):
    sender: TelegramSender  # made with the channel

    def __init__(self, host: ChannelHost, settings: TelegramSettings) -> None:
        super().__init__(host, settings)
        self.bot = Bot(
            settings.token_value(),
            base_url=f"{settings.base_url}/bot",
            base_file_url=f"{settings.base_url}/file/bot",
            # A few connections serve every chat (Telegram takes ~30 messages a second in all);
            # more made httpcore's pool bookkeeping the bottleneck (bench/README.md). A send
            # waits for a free connection rather than failing after PTB's 1 s default.
            request=HTTPXRequest(
                connection_pool_size=8,
                read_timeout=20.0,
                media_write_timeout=30.0,
                pool_timeout=30.0,
            ),
            get_updates_request=HTTPXRequest(
                connection_pool_size=1, read_timeout=float(settings.poll_timeout) + 10.0
            ),
        )
        self.sender = TelegramSender(self.bot, settings, self.policy)
        self.me: User | None = None
        if settings.mode == "webhook":  # served on the HTTP channel's port
            host.add_web_route("POST", settings.webhook_path, self._webhook)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """getMe (PTB's initialize the first time)."""
        try:
            if self.me is None:
                await self.bot.initialize()
                self.me = self.bot.bot
            else:
                self.me = await self.bot.get_me()
        except InvalidToken:
            raise kit.CredentialsRefused(_REFUSED.format(f"getMe at {self.cfg.base_url}")) from None
        except TelegramError as exc:
            raise kit.Unreachable(
                f"Telegram not reachable at {self.cfg.base_url} ({exc})"
            ) from None
        return f"@{self.me.username} (id {self.me.id}), {self.cfg.mode} mode"

    async def serve(self) -> None:
        if self.cfg.mode == "polling":
            await self._poll()
        elif await self._set_webhook():
            await super().serve()

    async def close(self) -> None:
        await self.quietly(self.bot.shutdown())

    # -- updates in ----------------------------------------------------------------------------
    async def _poll(self) -> None:
        """getUpdates with an offset that confirms every update up to the first one not yet
        settled (stored, or its job ended): the last update taken + 1 when all are. A released
        update (its job failed before the store) keeps the offset too, and is taken again
        when Telegram hands it back after `RETAKE_AFTER`."""
        try:
            await self.bot.delete_webhook()  # getUpdates is refused while a webhook is set
        except TelegramError as exc:
            logger.debug("Telegram deleteWebhook: {}", exc)
        self.up()
        last: int | None = None  # the newest update id taken
        waiting: dict[int, kit.Taken] = {}  # taken, not confirmed: the offset stays below them

        async def fetch() -> tuple[Update, ...]:
            nonlocal waiting
            if waiting:
                undecided = [t.outcome for t in waiting.values() if not t.done]
                if undecided:
                    await asyncio.wait(undecided, timeout=CONFIRM_WAIT)
                else:  # only released ones: asked for again after a pause
                    await self.pause(CONFIRM_WAIT)
                waiting = {u: t for u, t in waiting.items() if not t.confirmed}
            offset: int | None
            if waiting:  # Telegram answers at once: it hands back the unconfirmed ones
                offset, timeout = min(waiting), 0
            else:
                offset, timeout = (None if last is None else last + 1), self.cfg.poll_timeout
            try:
                return await self.bot.get_updates(
                    offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES
                )
            except InvalidToken:
                raise kit.CredentialsRefused(_REFUSED.format("getUpdates")) from None
            except TelegramError as exc:
                why = (
                    "another getUpdates or a webhook holds this bot"
                    if isinstance(exc, Conflict)
                    else exc
                )
                raise kit.Unreachable(f"Telegram getUpdates failed ({why})") from None

        def handle(updates: tuple[Update, ...]) -> None:
            nonlocal last
            for update in updates:
                last = max(last or 0, update.update_id)
                taken = self._take(update)
                if not taken.confirmed:
                    waiting[update.update_id] = taken

        await self.serve_polls(fetch, handle)

    async def _set_webhook(self) -> bool:
        """setWebhook until it works (backoff); the HTTP channel serves the route."""
        secret = self.cfg.secret_token.get_secret_value() if self.cfg.secret_token else None
        if secret is None:
            logger.warning(
                "channels.telegram.secret_token is not set: anyone who finds {} can post updates",
                self.cfg.webhook_path,
            )

        async def set_webhook() -> None:
            try:
                await self.bot.set_webhook(
                    self.cfg.webhook_url or "", secret_token=secret, allowed_updates=ALLOWED_UPDATES
                )
            except InvalidToken:
                raise kit.CredentialsRefused(_REFUSED.format("setWebhook")) from None
            except TelegramError as exc:
                raise kit.Unreachable(f"Telegram setWebhook failed ({exc})") from None

        return await self.retrying(set_webhook)

    async def _webhook(self, request: web.Request) -> web.Response:
        secret = self.cfg.secret_token
        if secret is not None:
            given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
            if not same_secret(given, secret.get_secret_value()):
                logger.warning("Telegram webhook POST without the right secret token refused")
                return web.json_response(
                    {"error": "wrong X-Telegram-Bot-Api-Secret-Token"}, status=403
                )
        try:
            update = Update.de_json(await request.json(), self.bot)
        except Exception as exc:  # not JSON, not an Update: nothing to take
            logger.warning("Telegram webhook POST that is not an Update ignored ({})", exc)
            return web.json_response({"error": "not an Update"}, status=400)
        # Not ready, or not stored within WEBHOOK_WAIT: a 503, and Telegram sends it again.
        take = (lambda: self._take(update)) if update is not None else kit.settled
        ok = web.json_response({"ok": True})
        return await webhook.answer(self, take, WEBHOOK_WAIT, ok, webhook.json_says("error"))

    def _take(self, update: Update) -> kit.Taken:
        """The update's job, queued in its chat's order once per update id; what settles
        when it may be confirmed."""
        return self.inbound.once(update.update_id, lambda previous: self._parse(update, previous))

    def _parse(self, update: Update, previous: kit.Taken | None) -> kit.Taken:
        if update.callback_query is not None:
            return self._press(update.callback_query, previous)
        message = update.message
        if message is None:
            return kit.settled()
        if message.new_chat_members:
            group = ChatRef(chat_ref(message).chat_id, None, is_group=True)  # the group's
            return self.inbound.take_events(
                group.key, lambda: self._member_joined(message), previous
            )
        if (
            message.text is not None
            or message.caption is not None
            or message.photo
            or message.voice
            or message.audio
        ):
            ref, ident = chat_ref(message), str(message.message_id)
            return self.inbound.take(ref.key, ident, lambda: self._incoming(ref, message), previous)
        return kit.settled()

    def _press(self, query: CallbackQuery, previous: kit.Taken | None) -> kit.Taken:
        """A button pressed under one of the bot's messages (OutgoingMessage.buttons): its data
        is the text the press sends, as the presser's own message in that chat ("/approve
        K3F9QX"), so a button answers exactly as the command would, with the same checks."""
        message = query.message
        if message is None or not query.data or not isinstance(message, Message):
            return kit.settled()
        ref, ident = chat_ref(message), f"cb{query.id}"
        return self.inbound.take(
            ref.key, ident, lambda: self._pressed(ref, message, query), previous
        )

    async def _pressed(
        self, ref: ChatRef, message: Message, query: CallbackQuery
    ) -> IncomingMessage | None:
        try:
            await query.answer()  # the button stops spinning; the answer comes as a message
        except TelegramError as exc:
            logger.debug("Telegram answerCallbackQuery: {}", exc)
        user = query.from_user
        if user.is_bot:
            return None
        roles = await self._roles(ref.chat_id, user.id) if ref.is_group else []
        chat_name = (message.chat.title or "") if ref.is_group else ""
        text, ident = query.data or "", f"cb{query.id}"
        return presses.press_message(
            self,
            ref.key,
            ref.is_group,
            str(user.id),
            text,
            ident,
            user.full_name,
            roles,
            chat_name=chat_name,
        )

    async def _incoming(self, ref: ChatRef, message: Message) -> IncomingMessage | None:
        assert self.me is not None
        user, sender_chat = message.from_user, message.sender_chat
        if user is not None and user.id == self.me.id:
            return None
        said = address(message, self.me.id, self.me.username or "")
        if said.other_bot:
            return None
        roles: list[str] = []
        if sender_chat is not None:  # on behalf of a chat: the group itself is an anonymous admin
            sender_id, name = str(sender_chat.id), sender_chat.title or str(sender_chat.id)
            if ref.is_group and sender_chat.id == ref.chat_id:
                roles = ["admin"]
        elif user is not None:
            sender_id, name = str(user.id), user.full_name
            self.sender.names[sender_id] = user.first_name
        else:
            return None
        images = [i for i in [await self._photo(message.photo)] if i]
        quoted: str | None = None
        replied = message.reply_to_message
        if replied is not None and replied.forum_topic_created is None:
            who = (
                replied.from_user.full_name
                if replied.from_user
                else (replied.sender_chat.title if replied.sender_chat else None)
            ) or "?"
            body = replied.text or replied.caption or ("[photo]" if replied.photo else "")
            quoted = quote_line(who, body)
            if replied.photo and (img := await self._photo(replied.photo)):
                images.append(img)  # "what is in this?" about a quoted photo
        command = clean_text(said.text).startswith("/")
        if ref.is_group and user is not None and not roles and command:
            roles = await self._roles(ref.chat_id, user.id)
        return self.incoming(
            ref.key,
            sender_id,
            said.text,
            is_group=ref.is_group,
            chat_name=(message.chat.title or "") if ref.is_group else "",
            sender_name=name,
            is_at_bot=said.at_bot,
            quoted=quoted,
            message_id=str(message.message_id),
            time=message.date,
            images=images,
            audio=[a for a in [await self._voice(message)] if a],
            sender_roles=roles,
            sender_is_bot=bool(user is not None and user.is_bot),
        )

    async def _voice(self, message: Message) -> str | None:
        """A voice note (OGG/Opus) or an audio file as a data URI, for speech to text."""
        media = message.voice or message.audio
        if media is None:
            return None
        data = await self._download("voice", media, MAX_VOICE_BYTES)
        mime = media.mime_type or ("audio/ogg" if message.voice else "audio/mpeg")
        return kit_media.voice_uri(data or b"", mime, MAX_VOICE_BYTES)

    async def _photo(self, sizes: tuple[PhotoSize, ...] | None) -> str | None:
        """The largest size of a photo (within what a model takes) as a data URI."""
        fitting = [s for s in sizes or () if (s.file_size or 0) <= MAX_PHOTO_BYTES]
        if not fitting:
            return None
        best = max(fitting, key=lambda s: (s.width * s.height, s.file_size or 0))
        data = await self._download("photo", best, MAX_PHOTO_BYTES)
        return kit_media.image_uri(data or b"", MAX_PHOTO_BYTES)

    async def _download(
        self, what: str, file: Voice | Audio | PhotoSize, limit: int
    ) -> bytes | None:
        """A file a user sent (getFile, then its download; kit/downloads.py): the file URL
        holds the bot's token, so it is never stored or shown."""

        async def download() -> bytes:
            got = await self.bot.get_file(file.file_id)
            return bytes(await got.download_as_bytearray())

        name, size = f"Telegram {what} {file.file_unique_id}", file.file_size
        return await downloaded(name, _ERRORS, download, size=size, limit=limit, log=self.log)

    async def _roles(self, chat_id: int, user_id: int) -> list[str]:
        """The sender's status in the group (getChatMember), for `bot.trust_group_admins`."""
        try:
            member = await self.bot.get_chat_member(chat_id, user_id)
        except TelegramError as exc:
            logger.warning("Telegram getChatMember {} in {} failed: {}", user_id, chat_id, exc)
            return []
        role = _ROLES.get(member.status)
        return [role] if role else []

    async def _member_joined(self, message: Message) -> list[SystemEvent]:
        assert self.me is not None
        chat_id, events = f"group:{message.chat.id}", []
        for member in message.new_chat_members or ():
            if member.id == self.me.id:
                logger.info("Telegram bot added to {} ({})", chat_id, message.chat.title)
            elif not member.is_bot:
                self.sender.names[str(member.id)] = member.first_name
                by = str(message.from_user.id) if message.from_user else ""
                events.append(
                    kit.member_joined(
                        self.platform, chat_id, str(member.id), member.full_name, added_by=by
                    )
                )
        return events
