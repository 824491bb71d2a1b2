"""The Slack channel: a Slack app's bot user, with slack_sdk's AsyncWebClient for the Web API
(auth.test, users.info, chat.postMessage, files_upload_v2) and request signatures
(slack_sdk.signature), driven by this module so that a message goes through the bot's outbox
and per-chat order like on every channel (slack-bolt's App would own acks, listeners and
retries instead, which the outbox and the dedup below already do).

Events come one of two ways:
- Socket Mode (`app_token`): apps.connections.open gives a WebSocket URL; an envelope is
  acknowledged (`{"envelope_id": ...}`) once its message is stored (below). The WebSocket is
  held here (the documented protocol, https://api.slack.com/apis/socket-mode) rather than by
  slack_sdk's SocketModeClient, which reconnects at a fixed interval with no backoff and
  keeps reading a dropped session: here a dropped socket or a `disconnect` envelope is
  followed by a fresh URL, with exponential backoff while it keeps failing.
- The Events API (`signing_secret`): Slack POSTs to `/slack/events` on the HTTP channel's port;
  each request's `X-Slack-Signature` (v0 HMAC-SHA256 of `v0:{timestamp}:{body}`) is checked,
  with `X-Slack-Request-Timestamp` within 5 minutes; `url_verification` is answered with its
  challenge; an event is answered 200 once its message is stored (below).

Nothing lost: an event is acknowledged only once its message is stored or its job ended
(chatfn/channels/intake.py), waiting at most `ACK_WAIT` seconds (Slack's limit is 3). A message
still
waiting then (its chat's turn is running) is left unacknowledged (Events API: a 503), so Slack
sends it again (after about a minute, then five); by then it is stored and the resent event is
acknowledged at once. A process that dies before storing a message gets it again from Slack.

Handled once: Slack sends a message mentioning the bot both as `app_mention` and as
`message.*`, and retries an event (same `event_id`, `X-Slack-Retry-Num` / `retry_attempt`)
it thinks was not acknowledged in 3 s. Both are recognised (the channel+ts of the message and
the event id are remembered), and a message delivered again after a restart is found among the
stored messages (`host.was_stored`, its `ts` being the message id).

Button presses (OutgoingMessage.buttons, send.py: an approval request's Approve / Deny) come
as `block_actions` interactions: in Socket Mode an `interactive` envelope, acknowledged like an
event; with the Events API Slack POSTs them (form field `payload`, signed the same way) to the
app's Interactivity Request URL, which is the same `/slack/events` here. The button's `value`
becomes the presser's own message in that chat ("/approve K3F9QX"), so a press answers exactly
as the command would, with the same checks (the presser's roles from users.info).

Chat ids and incoming markup: parse.py. The way out: send.py. Roles for
`bot.trust_group_admins`: the workspace's owners and admins (users.info `is_owner`,
`is_primary_owner`: "owner"; `is_admin`: "admin"), cached `user_cache_seconds`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web
from loguru import logger
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from chatfn.channels import kit
from chatfn.channels.kit import presses, webhook
from chatfn.channels.kit.cache import Remembered
from chatfn.channels.slack.parse import ChatRef, chat_ref, read_text
from chatfn.channels.slack.send import BUTTON_ACTION, SlackSender, error_code, token_refused
from chatfn.channels.slack.settings import SlackSettings
from chatfn.common.messages import (
    IncomingMessage,
    SystemEvent,
)
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["EVENTS_PATH", "SlackChannel"]

EVENTS_PATH = "/slack/events"
ACK_WAIT = 2.5  # how long an ack waits for its message to be stored (Slack waits 3 s)
#: Message subtypes that are a person saying something; the rest (edits, deletions, joins,
#: bot_message, ...) are not messages to answer.
_SAID = {None, "file_share", "thread_broadcast"}


def _is_bot_message(event: dict[str, Any]) -> bool:
    """Another app's message (subtype bot_message, or a bot user's plain one): answered only
    where a chats: rule sets answer_bots (README, "Loop guard")."""
    return event.get("subtype") in (None, "bot_message")


def web_client(settings: SlackSettings, token: str) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=settings.api_base + "/", timeout=30)


class SlackChannel(kit.PlatformChannel[SlackSettings], platform="slack", label="Slack"):
    def __init__(self, host: ChannelHost, settings: SlackSettings) -> None:
        super().__init__(host, settings)
        self.client = web_client(settings, settings.secret_text("bot_token"))
        self.sender = SlackSender(self.client, settings, self.policy)
        self.bot_user_id: str | None = None
        self.bot_id = ""  # the app's bot id (auth.test): its own bot_message events
        self.team_id = ""
        self._users = Remembered[str, tuple[str, list[str]]](settings.user_cache_seconds)
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        if settings.mode == "events":
            self._verifier = SignatureVerifier(settings.secret_text("signing_secret"))
            host.add_web_route("POST", EVENTS_PATH, self._events)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """auth.test: who the bot user is."""
        if self._http is None:
            self._http = aiohttp.ClientSession()
        try:
            me = await self.client.auth_test()
        except SlackApiError as exc:
            fix = "check the app's Bot User OAuth Token (xoxb-...)"
            failed = kit.Unreachable(f"Slack auth.test failed ({error_code(exc) or exc})")
            raise token_refused(exc, "bot_token", fix, "auth.test") or failed from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise kit.Unreachable(f"Slack not reachable at {self.cfg.api_base} ({exc})") from None
        self.bot_user_id = str(me["user_id"])
        self.bot_id = str(me.get("bot_id") or "")
        self.team_id = str(me.get("team_id") or "")
        way = "Socket Mode" if self.cfg.mode == "socket" else f"Events API at {EVENTS_PATH}"
        team = me.get("team") or self.team_id
        return f"bot user {me.get('user')} ({self.bot_user_id}) in {team}, {way}"

    async def serve(self) -> None:
        if self.cfg.mode == "socket":
            await self.serve_polls(self._socket_mode)  # again with backoff while it fails
        else:
            await super().serve()

    async def close(self) -> None:
        sockets = (self._ws, self._http, self.client.session)
        await self.quietly(*(s.close() for s in sockets if s is not None))

    # -- Socket Mode ---------------------------------------------------------------------------
    async def _socket_mode(self) -> None:
        """apps.connections.open, then read envelopes until the socket drops: returns when
        Slack asked for a new connection (opened at once), raises Unreachable when it was
        lost."""
        assert self._http is not None
        try:
            opened = await self.client.apps_connections_open(
                app_token=self.cfg.secret_text("app_token")
            )
            async with self._http.ws_connect(str(opened["url"]), heartbeat=30) as ws:
                self._ws = ws
                why = await self._read_socket(ws)
        except SlackApiError as exc:
            fix = "check the app-level token (xapp-...) and its connections:write scope"
            if refused := token_refused(exc, "app_token", fix):
                raise refused from None
            why = f"apps.connections.open: {error_code(exc) or exc}"
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
            why = f"{type(exc).__name__}: {exc}"
        finally:
            self._ws = None
        if why != "refresh":  # "refresh": Slack asked for a new connection
            raise kit.Unreachable(f"Slack Socket Mode connection lost ({why})")

    async def _read_socket(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """Envelopes until the socket closes; returns why it ended ("refresh": Slack asked
        for a new connection, reconnect at once)."""
        async for envelope in kit.json_frames(ws, "Slack Socket Mode"):
            kind = envelope.get("type")
            if kind == "events_api" and isinstance(envelope.get("payload"), dict):
                if envelope.get("retry_attempt"):
                    logger.debug(
                        "Slack event resent (attempt {}, {})",
                        envelope.get("retry_attempt"),
                        envelope.get("retry_reason"),
                    )
                taken = self._callback(envelope["payload"])
            elif kind == "interactive" and isinstance(envelope.get("payload"), dict):
                taken = self._interaction(envelope["payload"])
            else:
                taken = kit.settled()
            if envelope.get("envelope_id"):
                ack = json.dumps({"envelope_id": envelope["envelope_id"]})
                if taken.confirmed:
                    await ws.send_str(ack)
                elif not taken.done:  # once stored; the socket goes on reading meanwhile
                    self.spawn(self._ack_when_stored(ws, ack, taken))
                # released (its job failed before the store): no ack, Slack sends it again
            if kind == "hello":
                self.up()  # what waited for the connection goes out now
            elif kind == "disconnect":
                if envelope.get("reason", "") == "link_disabled":
                    logger.error("Slack disabled Socket Mode for this app (link_disabled)")
                    return "link_disabled"
                return "refresh"  # refresh_requested, warning: a new URL now
        return f"socket closed ({ws.close_code})"

    async def _ack_when_stored(
        self, ws: aiohttp.ClientWebSocketResponse, ack: str, taken: kit.Taken
    ) -> None:
        """Acknowledge once stored within ACK_WAIT; later than that Slack has given up on this
        delivery and sends the event again (acknowledged then)."""
        if await taken.wait(ACK_WAIT, self._stopping) and not ws.closed:
            try:
                await ws.send_str(ack)
            except (ConnectionError, aiohttp.ClientError) as exc:
                logger.debug("Slack ack not sent: {}", exc)

    # -- Events API ----------------------------------------------------------------------------
    async def _events(self, request: web.Request) -> web.Response:
        body = await request.read()
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not (stamp.isdigit() and signature and self._verifier.is_valid(body, stamp, signature)):
            logger.warning("Slack Events API request with a bad or old signature refused")
            return web.json_response({"error": "invalid signature"}, status=401)
        if request.content_type == "application/x-www-form-urlencoded":
            # An interaction (Interactivity Request URL): the JSON is the form field `payload`.
            form = parse_qs(body.decode("utf-8", "replace"))
            payload = kit.json_object((form.get("payload") or [""])[0].encode())
        else:
            payload = kit.json_object(body)
        if payload is None:
            return web.json_response({"error": "not a JSON object"}, status=400)
        if payload.get("type") == "url_verification":
            return web.json_response({"challenge": str(payload.get("challenge", ""))})
        if retry := request.headers.get("X-Slack-Retry-Num"):
            logger.debug(
                "Slack event resent (attempt {}, {})",
                retry,
                request.headers.get("X-Slack-Retry-Reason", ""),
            )
        take = {"block_actions": self._interaction, "event_callback": self._callback}.get(
            str(payload.get("type")), lambda _payload: kit.settled()
        )
        # Not ready, or not stored within ACK_WAIT: a 503, and Slack sends it again.
        ok = web.json_response({"ok": True})
        return await webhook.answer(
            self, lambda: take(payload), ACK_WAIT, ok, webhook.json_says("error")
        )

    # -- events --------------------------------------------------------------------------------
    def _callback(self, payload: dict[str, Any]) -> kit.Taken:
        """One event_callback (from either way in); what settles when it may be acknowledged.
        An event seen before (Slack's retry) gets the first delivery's."""
        event = payload.get("event")
        if not isinstance(event, dict):
            return kit.settled()
        if not payload.get("event_id"):
            return self._take(event, None)
        key = f"event:{payload['event_id']}"
        return self.inbound.once(key, lambda previous: self._take(event, previous))

    def _interaction(self, payload: dict[str, Any]) -> kit.Taken:
        """A `block_actions` interaction: a press of one of the bot's buttons is the presser's
        message with the button's value; anything else is acknowledged and left alone."""
        if payload.get("type") != "block_actions":
            return kit.settled()
        user = str((payload.get("user") or {}).get("id") or "")
        container = payload.get("container") or {}
        message = payload.get("message") or {}
        channel = str(container.get("channel_id") or (payload.get("channel") or {}).get("id") or "")
        ts = str(container.get("message_ts") or message.get("ts") or "")
        pressed = [
            a
            for a in payload.get("actions") or []
            if isinstance(a, dict)
            and a.get("type") == "button"
            and str(a.get("action_id", "")).startswith(BUTTON_ACTION)
            and a.get("value")
        ]
        if not pressed or not user or not channel or user == self.bot_user_id:
            return kit.settled()
        action = pressed[0]
        thread = container.get("thread_ts") or message.get("thread_ts")
        ref = chat_ref(channel, None, thread, ts)
        ident = f"press:{user}:{action.get('action_ts') or payload.get('trigger_id') or ts}"
        text = str(action["value"])
        return self.inbound.message_once(
            ref.key, ident, lambda: self._pressed(ref, user, text, ident)
        )

    async def _pressed(
        self, ref: ChatRef, user: str, text: str, ident: str
    ) -> IncomingMessage | None:
        name, roles = await self._user(user)
        return presses.press_message(self, ref.key, ref.is_group, user, text, ident, name, roles)

    def _take(self, event: dict[str, Any], previous: kit.Taken | None) -> kit.Taken:
        kind = event.get("type")
        if kind in ("message", "app_mention"):
            bot = str(event.get("bot_id") or "")  # another bot's: marked (sender_is_bot)
            if event.get("subtype") not in _SAID and not (bot and _is_bot_message(event)):
                return kit.settled()
            channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
            user = str(event.get("user") or bot)
            own = user == self.bot_user_id or bool(bot and bot == self.bot_id)
            if not channel or not ts or not user or own:
                return kit.settled()
            ref = chat_ref(channel, event.get("channel_type"), event.get("thread_ts"), ts)

            mention = kind == "app_mention"
            # The same message comes as app_mention and as message.*: taken once.
            return self.inbound.once(
                f"message:{channel}:{ts}",
                lambda seen: self.inbound.take(
                    ref.key, ts, lambda: self._incoming(ref, event, mention), previous or seen
                ),
            )
        if kind == "member_joined_channel" and (channel := str(event.get("channel") or "")):
            return self.inbound.take_events(
                f"group:{channel}", lambda: self._member_joined(event), previous
            )
        return kit.settled()

    async def _incoming(
        self, ref: ChatRef, event: dict[str, Any], app_mention: bool
    ) -> IncomingMessage | None:
        ts, bot = str(event["ts"]), str(event.get("bot_id") or "")
        user = str(event.get("user") or bot)
        text, mentioned = read_text(str(event.get("text") or ""), self.bot_user_id or "")
        files = event.get("files") or []
        images = [i for f in files if (i := await self._file(f, "image/"))]
        # an audio clip (recorded in Slack, or an audio file): for voice.stt
        voices = [v for f in files if (v := await self._file(f, "audio/"))]
        if not text and not images and not voices:  # nothing said: users.info is not asked
            return None
        roles: list[str] = []
        if bot:  # users.info knows no bot ids: the name the bot posted with
            name = str(event.get("username") or user)
        else:
            name, roles = await self._user(user)
        return self.incoming(
            ref.key,
            user,
            text,
            is_group=ref.is_group,
            sender_name=name,
            is_at_bot=mentioned or app_mention,
            message_id=ts,
            time=kit.sent_at(ts),
            images=images,
            audio=voices,
            sender_roles=roles if ref.is_group else [],
            sender_is_bot=bool(bot),
        )

    def _trusted_file_url(self, url: str) -> bool:
        """The bot token goes only to Slack's file hosts (or the configured API's host)."""
        parts, api = urlsplit(url), urlsplit(self.cfg.api_base)
        host = parts.hostname or ""
        if parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
            return True
        return (parts.scheme, parts.netloc) == (api.scheme, api.netloc)

    async def _file(self, file: Any, kind: str) -> str | None:
        """A message's file of `kind` ("image/", "audio/") as a data URI (its url_private
        needs the bot token, so the URL is never stored or shown)."""
        if not isinstance(file, dict) or not str(file.get("mimetype", "")).startswith(kind):
            return None
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not url or int(file.get("size") or 0) > kit.MAX_IMAGE_IN:
            return None
        if not self._trusted_file_url(url):
            logger.warning("Slack file {} at an unexpected host not fetched", file.get("id"))
            return None
        assert self._http is not None
        return await kit.fetch_image(
            self._http,
            url,
            mime=str(file.get("mimetype")),
            headers={"Authorization": f"Bearer {self.cfg.secret_text('bot_token')}"},
            what=f"Slack file {file.get('id')}",
        )

    async def _user(self, user: str) -> tuple[str, list[str]]:
        """(display name, workspace roles) from users.info, cached."""
        cached = self._users.get(user)
        if cached is not None:
            return cached
        try:
            info = (await self.client.users_info(user=user))["user"]
        except (SlackApiError, aiohttp.ClientError, TimeoutError, KeyError) as exc:
            logger.warning("Slack users.info {} failed: {}", user, exc)
            return user, []
        profile = info.get("profile") or {}
        name = (
            profile.get("display_name")
            or profile.get("real_name")
            or info.get("real_name")
            or info.get("name")
            or user
        )
        roles = (
            ["owner"]
            if info.get("is_owner") or info.get("is_primary_owner")
            else (["admin"] if info.get("is_admin") else [])
        )
        return self._users.put(user, (str(name), roles))

    async def _member_joined(self, event: dict[str, Any]) -> list[SystemEvent]:
        user, chat_id = str(event.get("user") or ""), f"group:{event['channel']}"
        if user == self.bot_user_id:
            logger.info("Slack bot added to {}", chat_id)
            return []
        if not user:
            return []
        name, _roles = await self._user(user)
        by = str(event.get("inviter") or "")
        return [kit.member_joined(self.platform, chat_id, user, name, added_by=by)]
