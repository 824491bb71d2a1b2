"""The OneBot v11 channel: QQ (NapCat, LLOneBot, Lagrange) and the bridges that speak OneBot v11.

Reverse WebSocket: the bot listens, the OneBot implementation connects to
`ws://<host>:<port>/onebot/v11/ws` (the "Universal" role: events and actions on one socket;
`/onebot/v11/ws/api` and `/onebot/v11/ws/event` for implementations that split them) and names
its account in the `X-Self-ID` header. Several accounts may be connected at once; each keeps
its own socket, and a reconnecting account replaces its old socket.

Chats are `group:<group_id>` and `private:<user_id>`; sender ids are QQ numbers as strings (so
`bot.admins` lists QQ numbers).

Delivery policy (a reply must not vanish silently):
- every action carries an `echo` and waits for its response up to `action_timeout`;
- when an account's socket is down, a send waits up to `reconnect_wait` for it to come back;
- a failed or timed-out send is logged with its retcode and retried once; a send that may
  have happened (timed out, or the socket dropped after it went out) is first looked for in
  the chat's history (history.py), and so is every message owed from before a restart
  (the outbox asks `find_sent`): found, it is not sent again;
- a send whose account is still not connected, or whose retry also lost its connection, raises
  NotDelivered: the message (or the parts of it still owed) waits in the bot's outbox, in the
  database, so it survives a restart, and is sent, in order, as soon as an account connects;
  a send the platform refuses twice (e.g. the bot is muted) is logged as an error with both
  retcodes and raised (DeliveryError, a DeliveryRefused) to the caller of `send()`.

When an account (re)connects, what recently active chats said while it was away is read back
from their history and handled once (catchup.py). Sockets and actions: link.py; the way
out: send.py.

Hostile or broken input: a frame that is not JSON, nests too deep, or has fields of the wrong
type is logged and skipped, never closes the socket; an event whose `self_id` differs from the
connection's `X-Self-ID` is ignored (it could route replies through another account); text over
MAX_TEXT_CHARS is stored truncated with a note.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.quotes import quote_line
from chatfn.channels.kit.recent import Recent
from chatfn.channels.onebot.catchup import CatchUp
from chatfn.channels.onebot.link import (
    WS_PATH,
    ActionError,
    ActionTimeout,
    NotConnected,
    OneBotLink,
    _Connection,
    _int,
)
from chatfn.channels.onebot.message import normalize, parse_message
from chatfn.channels.onebot.send import DeliveryError, OneBotSender
from chatfn.channels.onebot.settings import OneBotSettings
from chatfn.channels.probes import warn_open
from chatfn.common.messages import (
    IncomingMessage,
    OutgoingMessage,
    SystemEvent,
    capped_text,
    clean_text,
    surrogate_at,
)
from chatfn.runtime.channel_host import ChannelHost

__all__ = [
    "WS_PATH",
    "ActionError",
    "ActionTimeout",
    "DeliveryError",
    "NotConnected",
    "OneBotChannel",
]

ROLES = ("owner", "admin")  # the OneBot `sender.role` values that are a group's admins
_QUOTE_CACHE = 2000  # message ids remembered for `reply` segments (incoming and sent)


class OneBotChannel(OneBotLink):
    def __init__(
        self,
        host: ChannelHost,
        settings: OneBotSettings | None = None,
        *,
        bind: str | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(host, settings)
        self.bind = bind or self.cfg.host
        self.port = self.cfg.port if port is None else port
        self.web.listen(self.bind, self.port)
        self._owns_web = False
        # message id -> (text, image references)
        self._quotes: Recent[str, tuple[str, list[str]]] = Recent(_QUOTE_CACHE)
        name = host.settings.bot.name
        sent = lambda message_id, text: self._remember(message_id, f"{name}: {text}")  # noqa: E731
        self.sender: OneBotSender = OneBotSender(self, self.cfg, self.policy, sent=sent)
        self.catch_up = CatchUp(self, self._missed)
        self.bound_port: int | None = None

    def _on_connected(self, conn: _Connection) -> None:
        self.host.kick()  # what waited for an account goes out now
        self.spawn(self.catch_up.run(conn))  # what was said while it was away

    def _missed(self, conn: _Connection, event: dict[str, Any]) -> bool:
        """A message read back from the history (catchup.py), handled like a live one
        unless its id was seen already (`inbound.first_sight`, by account and id: a message
        caught up that also arrives live, or the other way round, is handled once)."""
        if (conn.self_id, str(event.get("message_id"))) in self.inbound.seen:
            return False
        self._on_event(conn, event)
        return True

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen for the accounts: the runtime started this listener with the web server
        (`chatfn run`), or, for a channel run alone, it starts here and stops in `close`."""
        if self.bound_port is not None:
            return
        self._owns_web = not self.web.running
        await self.web.start()
        self.bound_port = self.web.bound_port
        logger.info(
            "OneBot v11 channel listening on ws://{}:{}{}", self.bind, self.bound_port, WS_PATH
        )
        warn_open("onebot", "access_token", self.bind, self.cfg.access_token, "any QQ account")

    async def connect(self) -> None:
        """The server the accounts connect to (`start`): nothing to log in to."""
        await self.start()

    async def close(self) -> None:
        """Every account's socket, then the listener if this channel started it (else the
        runtime stops it with the web server)."""
        for conn in list(self._conns.values()):
            await conn.ws.close()
        if self._owns_web:
            self._owns_web = False
            await self.web.stop()

    # -- frames and events -----------------------------------------------------------------
    def _on_event(self, conn: _Connection, event: dict[str, Any]) -> None:
        """Events are handled off the reader (a handler may itself call actions, whose
        responses arrive on this very socket) but queued per chat, so one chat's events are
        handled in the order they arrived while other chats run concurrently."""
        claimed = event.get("self_id")
        if claimed is not None and str(claimed) != conn.self_id:
            logger.warning(
                "OneBot connection of {} sent an event for self_id {!r}: ignored",
                conn.self_id,
                claimed,
            )
            return
        self_id = conn.self_id
        post_type = event.get("post_type")
        if post_type in ("message", "message_sent"):
            if post_type == "message_sent":
                return  # the bot's own messages echoed back by some implementations
            parsed = self._incoming(self_id, event)
            if parsed is None:
                return
            msg, reply_id = parsed
            if msg.message_id and not self.inbound.first_sight((self_id, msg.message_id)):
                return  # caught up from the history already, or sent twice by the peer
            self.sender.serves(msg.chat_id, self_id)

            async def sink(out: OutgoingMessage) -> None:
                # The account the message came to answers it (the route, read at once by the
                # sender). NotDelivered: the bot's outbox keeps it; DeliveryError: logged.
                self.sender.serves(out.chat_id, self_id)
                await self.deliver(out)

            read = lambda: self._quoted(self_id, msg, reply_id)  # noqa: E731
            self.inbound.message((self_id, msg.chat_id), msg.message_id, read, sink=sink)
        elif post_type in ("notice", "request") and _invalid_id(event, post_type):
            return
        elif post_type == "notice":
            # In the group's queue: a welcome goes out before the answer to the newcomer's
            # first message.
            chat = (self_id, f"group:{event.get('group_id')}")
            self.inbound.events(chat, lambda: self._member_joined(self_id, event))
        elif post_type == "request":
            chat = (self_id, f"private:{event.get('user_id')}")
            self.inbound.events(chat, lambda: self._friend_request(self_id, event))
        elif post_type == "meta_event":
            self._on_meta(conn, event)

    def _incoming(
        self, self_id: str, event: dict[str, Any]
    ) -> tuple[IncomingMessage, str | None] | None:
        """The IncomingMessage of a message event, and the id of the message it quotes."""
        kind = event.get("message_type")
        user_id = str(event.get("user_id", ""))
        if kind not in ("group", "private") or not user_id:
            logger.debug("OneBot message event ignored: message_type={!r}", kind)
            return None
        if user_id == self_id:
            return None  # the account's own message (reported by some implementations)
        parsed = parse_message(
            normalize(event.get("message", event.get("raw_message", ""))), self_id
        )
        sender = event.get("sender")
        sender = sender if isinstance(sender, dict) else {}
        name = clean_text(str(sender.get("card") or sender.get("nickname") or user_id))[:128]
        text = clean_text(parsed.text)
        text = capped_text(text, "OneBot", user_id)
        is_group = kind == "group"
        chat_id = f"group:{event.get('group_id')}" if is_group else f"private:{user_id}"
        message_id = str(event.get("message_id", ""))
        if _invalid_id(event, "message"):
            return None
        if message_id:
            self._remember(message_id, quote_line(name, text), parsed.images)
        msg = IncomingMessage(
            platform=self.platform,
            chat_id=chat_id,
            sender_id=user_id,
            text=text,
            is_group=is_group,
            chat_name=str(event.get("group_name") or ""),
            sender_name=name,
            is_at_bot=parsed.at_bot,
            message_id=message_id,
            images=list(parsed.images),
            audio=list(parsed.audio),
            # OneBot v11 group message events: sender.role is "owner", "admin" or "member".
            sender_roles=[role] if is_group and (role := sender.get("role")) in ROLES else [],
            time=kit.sent_at(event.get("time")),
        )
        return msg, parsed.reply_id

    async def _quoted(
        self, self_id: str, msg: IncomingMessage, reply_id: str | None
    ) -> IncomingMessage | None:
        """`msg` with the message it quotes; None when it says nothing."""
        if reply_id:
            quote = self._quotes.get(reply_id) or await self._fetch_quote(self_id, reply_id)
            if quote is not None:
                msg.quoted_text = quote[0]
                msg.images = [*msg.images, *quote[1]]  # "what is in this?" about a quoted image
        if not msg.text and not msg.quoted_text and not msg.audio:
            return None  # a bare mention or an unsupported segment only: nothing to answer
        return msg

    async def _fetch_quote(self, self_id: str, message_id: str) -> tuple[str, list[str]] | None:
        """The text of a quoted message the bot has not seen (sent before it started, or by
        another client): one `get_msg`, bounded so a slow implementation cannot stall the chat.
        None when it cannot be had; the message is still handled."""
        try:
            data = await self.call_action(
                self_id,
                "get_msg",
                {"message_id": _int(message_id)},
                timeout=min(3.0, self.cfg.action_timeout),
                wait=0,
            )
        except ActionError as exc:
            logger.debug("quoted message {} not fetched: {}", message_id, exc)
            return None
        parsed = parse_message(normalize(data.get("message", data.get("raw_message", ""))), self_id)
        sender = data.get("sender") or {}
        name = sender.get("card") or sender.get("nickname") or sender.get("user_id") or "?"
        text = f"{name}: {parsed.text}"
        self._remember(message_id, text, parsed.images)
        return text, parsed.images

    def _remember(self, message_id: str, text: str, images: list[str] | None = None) -> None:
        self._quotes.put(message_id, (text, images or []))

    async def _member_joined(self, self_id: str, event: dict[str, Any]) -> list[SystemEvent]:
        if event.get("notice_type") != "group_increase":
            return []
        user_id = str(event.get("user_id", ""))
        if user_id == self_id:
            logger.info("OneBot account {} joined group {}", self_id, event.get("group_id"))
            return []
        chat_id = f"group:{event.get('group_id')}"
        self.sender.serves(chat_id, self_id)
        by = str(event.get("operator_id", ""))
        data = {"self_id": self_id, "sub_type": event.get("sub_type"), "operator_id": by}
        return [kit.member_joined(self.platform, chat_id, user_id, user_id, **data)]

    async def _friend_request(self, self_id: str, event: dict[str, Any]) -> list[SystemEvent]:
        if event.get("request_type") != "friend":
            logger.info(
                "OneBot {} request from {} left pending",
                event.get("request_type"),
                event.get("user_id"),
            )
            return []
        user_id = str(event.get("user_id", ""))
        approve = self.cfg.friend_requests == "approve"
        if approve:
            try:
                await self.call_action(
                    self_id,
                    "set_friend_add_request",
                    {"flag": event.get("flag", ""), "approve": True},
                )
            except ActionError as exc:
                logger.error("friend request from {} not approved: {}", user_id, exc)
                approve = False
        logger.info("friend request from {} {}", user_id, "approved" if approve else "ignored")
        chat_id = f"private:{user_id}"
        self.sender.serves(chat_id, self_id)
        comment = event.get("comment", "")
        data = {"self_id": self_id, "comment": comment}
        return [kit.friend_request(self.platform, chat_id, user_id, approve, **data)]

    def _on_meta(self, conn: _Connection, event: dict[str, Any]) -> None:
        """Lifecycle events are logged; heartbeats only refresh `last_seen` (the socket's own
        ping/pong is what detects a dead peer) and record the interval for health output."""
        kind = event.get("meta_event_type")
        if kind == "heartbeat":
            interval = event.get("interval")
            if isinstance(interval, int | float) and interval > 0:
                conn.heartbeat_interval = interval / 1000
        elif kind == "lifecycle":
            logger.info("OneBot account {} lifecycle: {}", conn.self_id, event.get("sub_type"))

    # -- outgoing: OneBotSender (send.py) -------------------------------------------------
    async def send(self, message: OutgoingMessage) -> None:
        """Unsolicited messages (reminders, welcomes), through the account that last saw the
        chat: no login gates it, each account is there or not. Raises DeliveryError when the
        platform refused the message every time, NotDelivered when no account can take it
        now (the outbox keeps it)."""
        await self.deliver(message)

    async def find_sent(self, owed: list[tuple[OutgoingMessage, datetime]]) -> dict[int, bool]:
        """Which rows owed from before a restart went out already (`OneBotSender.find_sent`)."""
        return await self.sender.find_sent(owed)


def _invalid_id(event: dict[str, Any], kind: str) -> bool:
    """Whether an id of the event is not valid Unicode (a lone surrogate: valid JSON). Such an
    event is logged and skipped: replaced by U+FFFD, two different ids would become one chat
    or one user."""
    for field in ("user_id", "group_id", "message_id"):
        value = event.get(field)
        at = surrogate_at(value) if isinstance(value, str) else None
        if at is not None:
            logger.warning(
                "OneBot {} event refused: {} is not valid Unicode (a lone surrogate at "
                "position {})",
                kind,
                field,
                at,
            )
            return True
    return False
