"""The Feishu / Lark channel: a custom app's bot, through lark-oapi (REST: api.py; events by
the long connection: ws.py, or by webhook: webhook.py), driven by this module so that a
message goes through the bot's outbox and per-chat order like on every channel.

At start (and until it works, with backoff to once a minute): a tenant_access_token and
bot/v3/info, whose open_id is how the bot recognises its own mention. Refused credentials
are one error line naming channels.feishu.app_id / app_secret.

Events handled (schema 2.0):
- im.message.receive_v1: a user's message in a p2p or group chat (parse.py reads it). In a
  group the bot is addressed by its mention; images (an image message or a post's images)
  are fetched through the message resources API and given to vision models as data.
- im.chat.member.user.added_v1: each user added reaches the welcome built-in.
- im.chat.member.bot.added_v1: logged.
Handled once: the platform resends an event it thinks was not acknowledged (the same
event_id), and a message delivered again after a restart is found among the stored messages
(`host.was_stored`, its message_id being the id).

Nothing lost: an event is answered as handled (the long connection's response frame, the
webhook's 200) only once its message is stored or its job ended (chatfn/channels/intake.py), waiting
at most `ACK_WAIT` seconds (the platform allows 3). A message still waiting then (its chat's
turn is running) is answered as failed (a 500 frame, a 503), so the platform pushes it again
(after 5-15 s, then minutes) and it is acknowledged then; a process that dies before storing
a message gets it again.

Buttons (OutgoingMessage.buttons: an approval request's Approve / Deny; send.py, render.py):
a click comes as the `card.action.trigger` callback, over the long connection (ws.py) or
POSTed to the webhook's URL (the app's callback request URL, encrypted and signed like
events), and wants its answer within 3 seconds: a toast for the clicker and, optionally, the
card shown instead (https://open.feishu.cn/document/uAjLw4CM/ukzMukzMukzM/feishu-cards/
card-callback-communication). The button's value names the text a press sends ("/approve
K3F9QX") and the chat the card was sent to (refused when the click comes from another chat);
that text becomes the clicker's own message in the chat, so a click answers exactly as the
command would, with the same checks (the approver's roles below, stale and already-answered
requests refused and audited by function_calls/approvals.py). For `/approve` and `/deny` the
command's answer is the toast instead of a chat message: a refusal ("You may not answer
request K3F9QX.") is seen by the clicker only and leaves the card as it was; a decision
("Approved K3F9QX: transfer runs now.") shows the card again without its buttons, with the
decision and who took it; so does a click on an expired request, with its expiry. An answer
not ready within `PRESS_WAIT` (the chat's turn is running) is a "being handled" toast and
follows as a message; a decision then updates the card through the API (api.py
`update_card`, PATCH im/v1/messages/{message_id}).

Roles for `bot.trust_group_admins`: the group's owner ("owner") and its managers ("admin"),
from im/v1/chats/{chat_id} (`owner_id`, `user_manager_id_list`, as open_ids); senders' names
from the chat's members list (message events carry only ids); both cached
`role_cache_seconds` per chat.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.feishu.api import ERRORS, FeishuApi
from chatfn.channels.feishu.parse import ChatRef, chat_ref, parse_chat_id, read_message
from chatfn.channels.feishu.render import PRESS, card, mention, to_feishu_markdown
from chatfn.channels.feishu.send import FeishuSender
from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.feishu.webhook import Refused, open_request
from chatfn.channels.feishu.ws import CARD_ACTION, Answer, WsLink
from chatfn.channels.kit import media, presses, webhook
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.roster import Roster, Rosters
from chatfn.common.messages import (
    IncomingMessage,
    SystemEvent,
)
from chatfn.common.payload import object_at
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["FeishuChannel"]

ACK_WAIT = 2.5  # how long an event's answer waits for its message to be stored (3 s allowed)
PRESS_WAIT = 2.5  # how long a click's answer waits for the command's answer (3 s allowed)
SAY = webhook.json_says("msg")  # the webhook's answers: {"msg": ...}
TOAST_LIMIT = 300  # characters of a toast (a sentence: the platform shows it briefly)
TOASTS = {"pending": "info", "refused": "error", "expired": "error", "decided": "success"}
# A Feishu API call that failed: the platform's answer or the network.
_API_ERRORS = ERRORS.every


class FeishuChannel(kit.PlatformChannel[FeishuSettings], platform="feishu", label="Feishu"):
    def __init__(self, host: ChannelHost, settings: FeishuSettings) -> None:
        super().__init__(host, settings)
        self.api = FeishuApi(settings)
        self.sender = FeishuSender(self.api, settings, self.policy)
        self.bot_open_id: str | None = None
        self.bot_name = ""
        warning = "Feishu chat {} owner, managers and names not read: {}"
        self._chats = Rosters(settings.role_cache_seconds, self._roster, _API_ERRORS, warning)
        self._link: WsLink | None = None
        # Clicks being answered or answered lately, by event id: a resent callback gets the
        # first one's answer (the command runs once).
        self._presses = presses.AnsweredOnce[dict[str, Any]]({})
        if settings.mode == "webhook":
            host.add_web_route("POST", settings.webhook_path, self._webhook)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """A token and bot/v3/info: the bot's open_id (how it recognises its own mention)."""
        fix = "check the app's Credentials & Basic Info page"
        with ERRORS.connecting("bot/v3/info", self.cfg.base_url, fix):
            bot = await self.api.bot_info()
        self.bot_open_id = str(bot["open_id"])
        self.bot_name = str(bot.get("app_name") or "")
        how = "the long connection"
        if self.cfg.mode != "websocket":
            how = f"webhook at {self.cfg.webhook_path}"
        return f"bot {self.bot_name} ({self.bot_open_id}) at {self.cfg.base_url}, events by {how}"

    async def serve(self) -> None:
        if self.cfg.mode != "websocket":
            await super().serve()
            return
        self._link = WsLink(self.cfg, self._linked, self)
        self._link.start()
        await self._stopping.wait()

    async def close(self) -> None:
        if self._link is not None:
            await self._link.stop()
        await self.api.aclose()

    # -- webhook -------------------------------------------------------------------------------
    async def _webhook(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            opened = open_request(
                body,
                request.headers,
                self.cfg.secret_text("verification_token"),
                self.cfg.secret_text("encrypt_key"),
            )
        except Refused as exc:
            return webhook.refused(self.log, "Feishu webhook request", exc, SAY)
        if opened.challenge is not None:
            return web.json_response({"challenge": opened.challenge})
        if _kind(opened.payload) == CARD_ACTION and self.logged_in and not self.stopping:
            return web.json_response(await self._clicked(opened.payload))
        # Not ready, or not stored within ACK_WAIT: a 503, and the platform sends it again.
        ok, take = web.json_response({"msg": "success"}), lambda: self._event(opened.payload)
        return await webhook.answer(self, take, ACK_WAIT, ok, SAY)

    # -- events --------------------------------------------------------------------------------
    async def _linked(self, payload: dict[str, Any]) -> Answer:
        """An event or a card's callback from the long connection: its answer."""
        if _kind(payload) == CARD_ACTION:
            return await self._clicked(payload)
        return await self._stored(payload)

    async def _stored(self, payload: dict[str, Any]) -> bool:
        """Take one event (from either way in); whether it may be acknowledged: its message
        stored (or nothing to store) within ACK_WAIT."""
        return await self._event(payload).wait(ACK_WAIT, self._stopping)

    def _event(self, payload: dict[str, Any]) -> kit.Taken:
        """One event, on the channel's loop; what settles when it may be acknowledged. An
        event seen before (the platform's resend) gets the first delivery's."""
        header = object_at(payload, "header")
        event = payload.get("event")
        if self.stopping:
            return kit.Taken()  # never settled: the platform sends it again after the restart
        if not isinstance(event, dict):
            return kit.settled()
        event_id = str(header.get("event_id") or "")
        kind = str(header.get("event_type") or "")
        if not event_id:
            return self._take(kind, event, None)
        return self.inbound.once(event_id, lambda previous: self._take(kind, event, previous))

    def _take(self, kind: str, event: dict[str, Any], previous: kit.Taken | None) -> kit.Taken:
        if kind == "im.message.receive_v1":
            message = event.get("message")
            sender = event.get("sender")
            if not isinstance(message, dict) or not isinstance(sender, dict):
                return kit.settled()
            if sender.get("sender_type") not in (None, "user"):
                return kit.settled()  # the bot's own and other apps' messages
            ref = chat_ref(message)
            if not ref.target or not message.get("message_id"):
                return kit.settled()
            ident = str(message["message_id"])
            return self.inbound.take(
                ref.key, ident, lambda: self._incoming(ref, message, sender), previous
            )
        if kind == "im.chat.member.user.added_v1" and (chat := str(event.get("chat_id") or "")):
            key = f"group:{chat}"
            return self.inbound.take_events(key, lambda: self._member_joined(key, event), previous)
        if kind == "im.chat.member.bot.added_v1":
            logger.info("Feishu bot added to group:{}", event.get("chat_id"))
        return kit.settled()

    # -- card buttons --------------------------------------------------------------------------
    async def _clicked(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A `card.action.trigger` callback: the answer the platform shows the clicker (module
        docstring). A resent callback (the same event id) gets the first one's answer."""
        if self.stopping:
            return {}
        event_id = str(object_at(payload, "header").get("event_id") or "")
        event = object_at(payload, "event")
        return await self._presses.answer(
            event_id, lambda: self._press(event, event_id), PRESS_WAIT
        )

    async def _press(self, event: dict[str, Any], event_id: str) -> dict[str, Any]:
        user = str(object_at(event, "operator").get("open_id") or "")
        context = object_at(event, "context")
        value = object_at(event, "action").get("value")
        if not isinstance(value, dict) or not isinstance(value.get(PRESS), str) or not user:
            return {}  # not one of the bot's buttons
        text = str(value[PRESS])
        try:
            ref = parse_chat_id(str(value.get("chat") or ""))
        except ValueError:
            return {}
        if ref.target != str(context.get("open_chat_id") or ""):
            logger.warning(
                "Feishu click on a card of {} in chat {}: refused",
                ref.key,
                context.get("open_chat_id"),
            )
            return {}
        ident = f"press:{event_id or user + ':' + str(time.time_ns())}"
        clicked = str(context.get("open_message_id") or "")

        async def redraw(said: str) -> None:  # the decision came after the click's answer
            try:
                await self.api.update_card(clicked, _decided_card(said, user, value))
            except _API_ERRORS as exc:  # the card keeps its buttons: the chat has the decision
                logger.warning("Feishu card {} not updated: {}", clicked, exc)

        read = lambda: self._pressed(ref, user, text, ident)  # noqa: E731
        got = await presses.answer_press(
            self, ref.key, ident, text, read, PRESS_WAIT, redraw if clicked else None
        )
        if got is None:
            return {}
        toast = _toast(TOASTS[got.kind], got.said)
        if got.kind in ("pending", "refused"):  # the clicker sees it; the card stays as it was
            return toast
        shown = json.loads(_decided_card(got.said, user if got.kind == "decided" else "", value))
        return {**toast, "card": {"type": "raw", "data": shown}}

    async def _pressed(
        self, ref: ChatRef, user: str, text: str, ident: str
    ) -> IncomingMessage | None:
        """A click as the clicker's own message in the chat (addressed to the bot)."""
        name, roles = await self._person(ref.target, user, ref.is_group)
        return presses.press_message(self, ref.key, ref.is_group, user, text, ident, name, roles)

    async def _incoming(
        self, ref: ChatRef, message: dict[str, Any], sender: dict[str, Any]
    ) -> IncomingMessage | None:
        message_id = str(message["message_id"])
        ids = object_at(sender, "sender_id")
        user = str(ids.get("open_id") or "")
        if not user:
            return None
        read = read_message(message, self.bot_open_id or "")
        images = [
            i
            for k in read.image_keys[:4]
            if (i := media.image_uri(await self._download(message_id, k, "image") or b""))
        ]
        voices = [  # a voice message (Ogg/Opus), for speech to text
            v
            for k in read.audio_keys[:1]
            if (v := media.voice_uri(await self._download(message_id, k, "file") or b""))
        ]
        if not read.text.strip() and not images and not voices:  # nothing said: not asked
            return None
        name, roles = await self._person(ref.target, user, ref.is_group)
        return self.incoming(
            ref.key,
            user,
            read.text,
            is_group=ref.is_group,
            sender_name=name,
            is_at_bot=read.mentioned,
            message_id=message_id,
            time=kit.sent_at(message.get("create_time"), ms=True),
            images=images,
            audio=voices,
            sender_roles=roles,
        )

    async def _download(self, message_id: str, key: str, kind: str) -> bytes | None:
        """A file of a message ("image", or "file": a voice) downloaded with the tenant token,
        so no URL is ever stored or shown (kit/downloads.py)."""
        what, download = f"Feishu {kind} {key} of {message_id}", self.api.download
        return await downloaded(what, _API_ERRORS, download, message_id, key, kind, log=self.log)

    async def _person(self, chat: str, user: str, is_group: bool) -> tuple[str, list[str]]:
        """(name, roles) of a user in a group (kit/roster.py). A one-to-one chat asks nothing:
        its name is not shown to the model."""
        return await self._chats.person(chat, user) if is_group else ("", [])

    async def _roster(self, chat: str) -> Roster:
        """A group's owner and managers (im/v1/chats/{chat_id}) and member names (its
        members list)."""
        info = await self.api.chat(chat)
        names = await self.api.members(chat)
        owners = [str(info["owner_id"])] if info.get("owner_id") else []
        return Roster(owners, [str(m) for m in info.get("user_manager_id_list") or []], names)

    async def _member_joined(self, key: str, event: dict[str, Any]) -> list[SystemEvent]:
        operator = object_at(event, "operator_id")
        by = str(operator.get("open_id") or "")
        events = []
        for user in event.get("users") or []:
            ids = user.get("user_id") if isinstance(user, dict) else None
            open_id = str(ids.get("open_id") or "") if isinstance(ids, dict) else ""
            if open_id:
                name = str(user.get("name") or "")[:128]
                events.append(kit.member_joined(self.platform, key, open_id, name, added_by=by))
        return events


def _kind(payload: dict[str, Any]) -> str:
    return str(object_at(payload, "header").get("event_type") or "")


def _toast(kind: str, text: str) -> dict[str, Any]:
    return {"toast": {"type": kind, "content": text[:TOAST_LIMIT]}}


def _decided_card(said: str, user: str, value: dict[str, Any]) -> str:
    """The clicked card shown again after a decision: its markdown (kept in the button's
    value), then the decision and who took it; no buttons."""
    kept = str(value.get("markdown") or "")
    outcome = f"{to_feishu_markdown(said)} {mention(user) if user else ''}".strip()
    return card(f"{kept}\n\n{outcome}".strip())
