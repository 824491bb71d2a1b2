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

import asyncio
import json
import re
import time
from collections import OrderedDict
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.feishu.api import NETWORK_ERRORS, AuthRefused, FeishuApi, FeishuError
from chatfn.channels.feishu.parse import ChatRef, chat_ref, parse_chat_id, read_message
from chatfn.channels.feishu.render import PRESS, card, mention, to_feishu_markdown
from chatfn.channels.feishu.send import FeishuSender
from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.feishu.webhook import Refused, open_request
from chatfn.channels.feishu.ws import CARD_ACTION, Answer, WsLink
from chatfn.common import audio, i18n
from chatfn.common.messages import (
    IncomingMessage,
    OutgoingMessage,
    SystemEvent,
)
from chatfn.common.payload import object_at
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["FeishuChannel"]

MAX_AUDIO_BYTES = 20 * 1024 * 1024  # a voice message downloaded at most
ACK_WAIT = 2.5  # how long an event's answer waits for its message to be stored (3 s allowed)
PRESS_WAIT = 2.5  # how long a click's answer waits for the command's answer (3 s allowed)
TOAST_LIMIT = 300  # characters of a toast (a sentence: the platform shows it briefly)
# A press that answers an approval request: its answer is a toast (module docstring).
_ANSWERING = re.compile(r"^/(?:approve|deny)\s+([A-Za-z0-9]{1,32})(?:\s|$)")
_CREDENTIALS = "channels.feishu.app_id / app_secret"
# A Feishu API call that failed: the platform's answer or the network.
_API_ERRORS: tuple[type[BaseException], ...] = (FeishuError, *NETWORK_ERRORS)


class FeishuChannel(kit.PlatformChannel[FeishuSettings], platform="feishu", label="Feishu"):
    def __init__(self, host: ChannelHost, settings: FeishuSettings) -> None:
        super().__init__(host, settings)
        self.api = FeishuApi(settings)
        self.sender = FeishuSender(self.api, settings, self.policy)
        self.bot_open_id: str | None = None
        self.bot_name = ""
        self._chats: dict[str, tuple[float, dict[str, Any]]] = {}
        self._link: WsLink | None = None
        # Clicks being answered or answered lately, by event id: a resent callback gets the
        # first one's answer (the command runs once).
        self._presses: OrderedDict[str, asyncio.Future[dict[str, Any]]] = OrderedDict()
        if settings.mode == "webhook":
            host.add_web_route("POST", settings.webhook_path, self._webhook)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """A token and bot/v3/info: the bot's open_id (how it recognises its own mention)."""
        try:
            bot = await self.api.bot_info()
        except AuthRefused as exc:
            raise kit.CredentialsRefused(
                f"Feishu refused {_CREDENTIALS} ({exc}): check the app's Credentials & Basic "
                "Info page"
            ) from None
        except FeishuError as exc:
            raise kit.Unreachable(f"Feishu bot/v3/info failed ({exc})") from None
        except NETWORK_ERRORS as exc:
            raise kit.Unreachable(f"Feishu not reachable at {self.cfg.base_url} ({exc})") from None
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
        self._link = WsLink(self.cfg, self._linked, self._link_state)
        self._link.start()
        await self._stopping.wait()

    async def close(self) -> None:
        if self._link is not None:
            await self._link.stop()
        await self.api.aclose()

    def _link_state(self, state: str, detail: str) -> None:
        """What the long connection reports (on this loop)."""
        if state == "connected":
            self.up()
        elif state == "refused":
            self.down(
                kit.CredentialsRefused(
                    f"Feishu refused the long connection for {_CREDENTIALS} ({detail}): check "
                    "the app's credentials and that events use the long connection"
                )
            )
        else:
            what = "lost" if state == "lost" else "failed"
            self.down(kit.Unreachable(f"Feishu long connection {what} ({detail})"))

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
            logger.warning("Feishu webhook request refused: {}", exc)
            return web.json_response({"msg": str(exc)}, status=exc.status)
        if opened.challenge is not None:
            return web.json_response({"challenge": opened.challenge})
        if self.bot_open_id is None or self.stopping:
            return web.json_response({"msg": "not ready"}, status=503)  # the platform resends
        if _kind(opened.payload) == CARD_ACTION:
            return web.json_response(await self._clicked(opened.payload))
        if not await self._stored(opened.payload):
            return web.json_response({"msg": "not stored yet"}, status=503)
        return web.json_response({"msg": "success"})

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
            if not ref.chat or not message.get("message_id"):
                return kit.settled()
            taken, ident = kit.Taken(previous), str(message["message_id"])
            self.inbound.message(
                ref.key, ident, lambda: self._incoming(ref, message, sender), taken
            )
            return taken
        if kind == "im.chat.member.user.added_v1" and (chat := str(event.get("chat_id") or "")):
            key, taken = f"group:{chat}", kit.Taken(previous)
            self.inbound.events(key, lambda: self._member_joined(key, event), taken)
            return taken
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
        if event_id and (first := self._presses.get(event_id)) is not None:
            try:
                async with asyncio.timeout(PRESS_WAIT):
                    return dict(await asyncio.shield(first))
            except TimeoutError:
                return {}  # the first is still waiting: it gives the toast
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if event_id:
            self._presses[event_id] = answer
            while len(self._presses) > 1000:
                self._presses.popitem(last=False)
        try:
            result = await self._press(object_at(payload, "event"), event_id)
        except BaseException:
            answer.set_result({})  # a resend waiting for it gets no toast, not an error
            raise
        answer.set_result(result)
        return result

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
        if ref.chat != str(context.get("open_chat_id") or ""):
            logger.warning(
                "Feishu click on a card of {} in chat {}: refused",
                ref.key,
                context.get("open_chat_id"),
            )
            return {}
        ident = f"press:{event_id or user + ':' + str(time.time_ns())}"
        found = _ANSWERING.match(text)
        press = _Press(self, toasts=found is not None)
        if found is not None:
            press.approval = found.group(1).upper()
            if clicked := str(context.get("open_message_id") or ""):
                press.card = (clicked, user, value)
        job = self.inbound.message(
            ref.key, ident, lambda: self._pressed(ref, user, text, ident), sink=press.sink
        )
        if found is None:  # another button: its answer is a message, as a command's
            return {}
        approval = found.group(1).upper()
        try:
            async with asyncio.timeout(PRESS_WAIT):
                await asyncio.shield(job)
        except TimeoutError:
            if not press.replies:
                press.toasts = False  # what comes later goes to the chat
                language = i18n.language_of(self.host.settings, self.platform, ref.key)
                pending = i18n.translate(language, "core.approval.press_pending", id=approval)
                return _toast("info", pending)
        press.toasts = False
        said = "\n".join(r.text for r in press.replies if r.text).strip()
        if not said:
            return {}
        if _expired(said, approval):  # nobody can answer it now: the card says so
            shown = json.loads(_decided_card(said, "", value))
            return {**_toast("error", said), "card": {"type": "raw", "data": shown}}
        if not _decided(said, approval):  # refused: the clicker sees why, the card stays
            return _toast("error", said)
        shown = json.loads(_decided_card(said, user, value))
        return {**_toast("success", said), "card": {"type": "raw", "data": shown}}

    async def _pressed(
        self, ref: ChatRef, user: str, text: str, ident: str
    ) -> IncomingMessage | None:
        """A click as the clicker's own message in the chat (addressed to the bot)."""
        name, roles = await self._person(ref.chat, user, ref.is_group)
        return self.incoming(
            ref.key,
            user,
            text,
            is_group=ref.is_group,
            sender_name=name,
            is_at_bot=True,
            message_id=ident,
            sender_roles=roles,
        )

    async def _incoming(
        self, ref: ChatRef, message: dict[str, Any], sender: dict[str, Any]
    ) -> IncomingMessage | None:
        message_id = str(message["message_id"])
        ids = object_at(sender, "sender_id")
        user = str(ids.get("open_id") or "")
        if not user:
            return None
        read = read_message(message, self.bot_open_id or "")
        images = [i for k in read.image_keys[:4] if (i := await self._image(message_id, k))]
        audio = [a for k in read.audio_keys[:1] if (a := await self._audio(message_id, k))]
        if not read.text.strip() and not images and not audio:  # nothing said: not asked
            return None
        name, roles = await self._person(ref.chat, user, ref.is_group)
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
            audio=audio,
            sender_roles=roles,
        )

    async def _audio(self, message_id: str, file_key: str) -> str | None:
        """A voice message's file (Ogg/Opus) as a data URI, for speech to text: downloaded
        with the tenant token like an image, so no URL is stored."""
        try:
            data = await self.api.download(message_id, file_key, "file")
        except _API_ERRORS as exc:
            logger.warning("Feishu audio {} of {} not downloaded: {}", file_key, message_id, exc)
            return None
        if not data or len(data) > MAX_AUDIO_BYTES:
            return None
        mime = audio.audio_mime(data)
        return kit.data_uri(data, mime if mime.startswith("audio/") else "audio/ogg")

    async def _image(self, message_id: str, image_key: str) -> str | None:
        """An image of a message as a data URI (downloaded with the tenant token, so no URL
        is ever stored or shown)."""
        try:
            data = await self.api.download(message_id, image_key)
        except _API_ERRORS as exc:
            logger.warning("Feishu image {} of {} not downloaded: {}", image_key, message_id, exc)
            return None
        mime = kit.image_mime(data)
        return None if mime is None or len(data) > kit.MAX_IMAGE_IN else kit.data_uri(data, mime)

    async def _person(self, chat: str, user: str, is_group: bool) -> tuple[str, list[str]]:
        """(name, roles) of a user in a group: roles "owner" or "admin" (a manager). The
        group's owner, managers (im/v1/chats/{chat_id}) and member names (its members list)
        are cached `role_cache_seconds`, a failure too (one warning, not one per message); a
        user missing from a list older than 10 s is asked for again (a member who just
        joined). A one-to-one chat asks nothing: its name is not shown to the model."""
        if not is_group:
            return "", []
        now = time.monotonic()
        cached = self._chats.get(chat)
        stale = cached is None or now - cached[0] >= self.cfg.role_cache_seconds
        if cached is not None and not stale and user not in cached[1]["names"]:
            stale = now - cached[0] >= 10.0
        if stale:
            try:
                info = await self.api.chat(chat)
                names = await self.api.members(chat)
            except _API_ERRORS as exc:
                logger.warning("Feishu chat {} owner, managers and names not read: {}", chat, exc)
                info, names = {}, {}
            owners = [str(info["owner_id"])] if info.get("owner_id") else []
            managers = [str(m) for m in info.get("user_manager_id_list") or []]
            if len(self._chats) > 10000:
                self._chats.clear()
            cached = (now, {"owner": owners, "admin": managers, "names": names})
            self._chats[chat] = cached
        assert cached is not None
        name = str(cached[1]["names"].get(user, ""))
        return name, [r for r in ("owner", "admin") if user in cached[1][r]][:1]

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


class _Press:
    """Where the answer to one click goes: while `toasts`, into `replies` (the toast);
    afterwards, and for a button that is not an approval's, to the chat."""

    def __init__(self, channel: FeishuChannel, toasts: bool) -> None:
        self.channel = channel
        self.toasts = toasts
        self.replies: list[OutgoingMessage] = []
        self.approval = ""  # the request an approval's button answers
        # (message_id, clicker, button value) of the card clicked: updated through the API
        # when the decision comes after the click's answer (`PRESS_WAIT` passed).
        self.card: tuple[str, str, dict[str, Any]] | None = None

    async def sink(self, out: OutgoingMessage) -> None:
        if self.toasts:
            self.replies.append(out)
            return
        await self.channel.deliver(out)
        if self.card is None or not self.approval or not _decided(out.text, self.approval):
            return
        message_id, user, value = self.card
        self.card = None
        try:
            await self.channel.api.update_card(message_id, _decided_card(out.text, user, value))
        except _API_ERRORS as exc:  # the decision was said in the chat: the card keeps buttons
            logger.warning("Feishu card {} not updated: {}", message_id, exc)


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


def _expired(said: str, approval: str) -> bool:
    """Whether the answer is some language's "request ... has expired" for `approval`."""
    return any(
        said == texts["core.approval.stale.expired"].format(id=approval)
        for texts in i18n.CATALOGUES.values()
        if "core.approval.stale.expired" in texts
    )


def _decided(said: str, approval: str) -> bool:
    """Whether the answer to `/approve ID` or `/deny ID` decided the request: it is the
    approved or denied sentence of some language's catalogue (core.approval.approved /
    denied), whatever the function's name; a refusal is any other sentence."""
    for texts in i18n.CATALOGUES.values():
        for key in ("core.approval.approved", "core.approval.denied"):
            template = texts.get(key, "")
            head, found, tail = template.partition("{function}")
            if not found:
                continue
            try:
                head, tail = head.format(id=approval), tail.format(id=approval)
            except (KeyError, IndexError, ValueError):
                continue
            if said.startswith(head) and said.endswith(tail) and len(said) > len(head + tail):
                return True
    return False
