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
- a failed or timed-out send is logged with its retcode and retried once;
- a send whose account is still not connected, or whose retry also lost its connection, is kept
  (up to `resend_queue` messages, `resend_max_age` seconds) and sent, in order, as soon as that
  account reconnects; a send the platform refuses twice (e.g. the bot is muted) is logged as an
  error with both retcodes and raised to the caller of `send()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web
from loguru import logger

from channels.base import Channel
from channels.onebot_message import normalize, outgoing_segments, parse_message
from channels.outbound import OrderedRunner, Outbound
from common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from runtime.bot import Bot

WS_PATH = "/onebot/v11/ws"
_QUOTE_CACHE = 2000  # message ids remembered for `reply` segments (incoming and sent)


class ActionError(Exception):
    """An action did not succeed; `retcode` is OneBot's (or -1 for a timeout / lost socket)."""

    def __init__(self, action: str, retcode: int, message: str = "") -> None:
        super().__init__(f"{action} failed: retcode={retcode} {message}".rstrip())
        self.action = action
        self.retcode = retcode


class ActionTimeout(ActionError):
    """No response within `action_timeout`: the message may or may not have been sent."""


class NotConnected(ActionError):
    """The account's socket is down; `in_flight` when it dropped after the action was sent
    (the implementation may or may not have carried it out)."""

    in_flight: bool = False


class DeliveryError(Exception):
    """A message could not be delivered after its retry; raised from `OneBotChannel.send`."""


@dataclass(slots=True)
class _Connection:
    self_id: str
    ws: web.WebSocketResponse
    role: str
    pending: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    heartbeat_interval: float | None = None
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def can_act(self) -> bool:
        return self.role in ("universal", "api")


@dataclass(slots=True)
class _Undelivered:
    out: OutgoingMessage
    self_id: str
    queued_at: float


class OneBotChannel(Channel):
    platform = "onebot"

    def __init__(self, bot: Bot, *, host: str | None = None, port: int | None = None) -> None:
        super().__init__(bot)
        self.cfg = bot.settings.channels.onebot
        self.host = host or self.cfg.host
        self.port = self.cfg.port if port is None else port
        self.outbound = Outbound(
            max_length=self.cfg.max_message_length,
            rate=self.cfg.send_rate,
            burst=self.cfg.send_burst,
        )
        self.app = web.Application()
        for path in (WS_PATH, WS_PATH + "/", WS_PATH + "/api", WS_PATH + "/event"):
            self.app.router.add_get(path, self._ws_handler)
        self._conns: dict[str, _Connection] = {}
        self._connected: dict[str, asyncio.Event] = {}
        self._route: dict[str, str] = {}  # chat id -> self id that last saw it
        # message id -> (text, image references)
        self._quotes: OrderedDict[str, tuple[str, list[str]]] = OrderedDict()
        self._undelivered: deque[_Undelivered] = deque()
        self._inbound = OrderedRunner()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._echo = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self.bound_port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        logger.info(
            "OneBot v11 channel listening on ws://{}:{}{}", self.host, self.bound_port, WS_PATH
        )
        if not self.cfg.access_token and self.host not in ("127.0.0.1", "localhost", "::1"):
            logger.warning(
                "channels.onebot.access_token is not set but the channel listens on "
                "{}: anyone who can reach it can speak as any QQ account",
                self.host,
            )

    async def run(self) -> None:
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        self._stopping.set()
        for conn in list(self._conns.values()):
            await conn.ws.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def self_ids(self) -> list[str]:
        """Accounts connected right now."""
        return list(self._conns)

    # -- connections -----------------------------------------------------------------------
    def _authorised(self, request: web.Request) -> web.Response | None:
        """None when the request may connect, else the refusal: 401 without a token, 403 with a
        wrong one (as OneBot v11 specifies for its own servers)."""
        token = self.cfg.access_token
        if not token:
            return None
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        # OneBot v11 says "Bearer"; older CQHTTP-era implementations send "Token".
        if scheme.lower() not in ("bearer", "token"):
            given = request.query.get("access_token", "")
        if not given:
            return web.json_response({"error": "access token required"}, status=401)
        if not hmac.compare_digest(given.strip().encode(), token.encode()):
            return web.json_response({"error": "wrong access token"}, status=403)
        return None

    async def _ws_handler(self, request: web.Request) -> web.StreamResponse:
        refused = self._authorised(request)
        if refused is not None:
            logger.warning(
                "OneBot connection from {} refused: {}",
                request.remote,
                "no token" if refused.status == 401 else "wrong token",
            )
            return refused
        self_id = request.headers.get("X-Self-ID", "").strip()
        if not self_id:
            return web.json_response({"error": "X-Self-ID header required"}, status=400)
        role = request.headers.get("X-Client-Role", "Universal").lower()
        if request.path.endswith(("/api", "/event")):
            role = request.path.rsplit("/", 1)[1]
        ws = web.WebSocketResponse(heartbeat=30, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        conn = _Connection(self_id=self_id, ws=ws, role=role)
        if conn.can_act:
            old = self._conns.get(self_id)
            self._conns[self_id] = conn
            if old is not None and old.ws is not ws:
                logger.info("OneBot account {} reconnected; closing its old socket", self_id)
                await old.ws.close()
            self._connected.setdefault(self_id, asyncio.Event()).set()
            self._spawn(self._flush_undelivered(self_id))
        logger.info("OneBot account {} connected ({})", self_id, role)
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    conn.last_seen = time.monotonic()
                    self._on_frame(conn, frame.data)
                elif frame.type == WSMsgType.ERROR:
                    logger.warning("OneBot account {} socket error: {}", self_id, ws.exception())
        finally:
            self._drop(conn)
        return ws

    def _drop(self, conn: _Connection) -> None:
        if self._conns.get(conn.self_id) is conn:
            del self._conns[conn.self_id]
            self._connected[conn.self_id].clear()
            logger.warning("OneBot account {} disconnected", conn.self_id)
        for fut in conn.pending.values():
            if not fut.done():
                fut.set_exception(NotConnected("action", -1, "connection closed"))
        conn.pending.clear()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        return self._track(asyncio.ensure_future(coro))

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Keep a reference (so the task is not garbage-collected), cancel it on stop, and log
        what it raised instead of leaving it to "exception was never retrieved"."""
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.opt(exception=task.exception()).error("OneBot event handling failed")

    # -- frames and events -----------------------------------------------------------------
    def _on_frame(self, conn: _Connection, raw: str) -> None:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            logger.warning("OneBot account {} sent a frame that is not JSON", conn.self_id)
            return
        if not isinstance(data, dict):
            return
        if "post_type" in data:
            self._on_event(conn, data)
        elif "echo" in data:
            fut = conn.pending.pop(str(data["echo"]), None)
            if fut is not None and not fut.done():
                fut.set_result(data)

    def _on_event(self, conn: _Connection, event: dict[str, Any]) -> None:
        """Events are handled off the reader (a handler may itself call actions, whose
        responses arrive on this very socket) but queued per chat, so one chat's events are
        handled in the order they arrived while other chats run concurrently."""
        self_id = str(event.get("self_id") or conn.self_id)
        post_type = event.get("post_type")
        if post_type in ("message", "message_sent"):
            if post_type == "message_sent":
                return  # the bot's own messages echoed back by some implementations
            parsed = self._incoming(self_id, event)
            if parsed is None:
                return
            msg, reply_id = parsed
            self._route[msg.chat_id] = self_id
            self._in_order(
                self_id, msg.chat_id, lambda: self._handle_message(self_id, msg, reply_id)
            )
        elif post_type == "notice":
            # In the group's queue: a welcome goes out before the answer to the newcomer's
            # first message.
            self._in_order(
                self_id, f"group:{event.get('group_id')}", lambda: self._on_notice(self_id, event)
            )
        elif post_type == "request":
            self._in_order(
                self_id, f"private:{event.get('user_id')}", lambda: self._on_request(self_id, event)
            )
        elif post_type == "meta_event":
            self._on_meta(conn, event)

    def _in_order(self, self_id: str, chat_id: str, job: Callable[[], Awaitable[None]]) -> None:
        self._track(self._inbound.submit((self_id, chat_id), job))

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
        sender = event.get("sender") or {}
        name = str(sender.get("card") or sender.get("nickname") or user_id)
        is_group = kind == "group"
        chat_id = f"group:{event.get('group_id')}" if is_group else f"private:{user_id}"
        message_id = str(event.get("message_id", ""))
        if message_id:
            self._remember(message_id, f"{name}: {parsed.text}", parsed.images)
        msg = IncomingMessage(
            platform=self.platform,
            chat_id=chat_id,
            sender_id=user_id,
            text=parsed.text,
            is_group=is_group,
            chat_name=str(event.get("group_name") or ""),
            sender_name=name,
            is_at_bot=parsed.at_bot,
            message_id=message_id,
            images=list(parsed.images),
        )
        with contextlib.suppress(TypeError, ValueError, OverflowError, OSError):
            if event.get("time"):
                msg.time = datetime.fromtimestamp(int(event["time"]), UTC)
        return msg, parsed.reply_id

    async def _handle_message(
        self, self_id: str, msg: IncomingMessage, reply_id: str | None
    ) -> None:
        if reply_id:
            quote = self._quotes.get(reply_id) or await self._fetch_quote(self_id, reply_id)
            if quote is not None:
                msg.quoted_text = quote[0]
                msg.images = [*msg.images, *quote[1]]  # "what is in this?" about a quoted image
        if not msg.text and not msg.quoted_text:
            return  # a bare mention or an unsupported segment only: nothing to answer

        async def sink(out: OutgoingMessage) -> None:
            try:
                await self._deliver(self_id, out)
            except DeliveryError:
                pass  # logged with its retcodes; the reply is in the chat's history

        try:
            await self.bot.handle(msg, sink)
        except Exception as exc:  # one failing message must not stop the chat's queue
            logger.opt(exception=exc).error(
                "OneBot message {} in {} failed", msg.message_id, msg.chat_id
            )

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
        self._quotes[message_id] = (text, images or [])
        if len(self._quotes) > _QUOTE_CACHE:
            self._quotes.popitem(last=False)

    async def _on_notice(self, self_id: str, event: dict[str, Any]) -> None:
        if event.get("notice_type") != "group_increase":
            return
        user_id = str(event.get("user_id", ""))
        if user_id == self_id:
            logger.info("OneBot account {} joined group {}", self_id, event.get("group_id"))
            return
        chat_id = f"group:{event.get('group_id')}"
        self._route[chat_id] = self_id
        await self.bot.handle_event(
            SystemEvent(
                kind="member_joined",
                platform=self.platform,
                chat_id=chat_id,
                user_id=user_id,
                user_name=user_id,
                is_group=True,
                data={
                    "self_id": self_id,
                    "sub_type": event.get("sub_type"),
                    "operator_id": str(event.get("operator_id", "")),
                },
            )
        )

    async def _on_request(self, self_id: str, event: dict[str, Any]) -> None:
        if event.get("request_type") != "friend":
            logger.info(
                "OneBot {} request from {} left pending",
                event.get("request_type"),
                event.get("user_id"),
            )
            return
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
        self._route[chat_id] = self_id
        await self.bot.handle_event(
            SystemEvent(
                kind="friend_request",
                platform=self.platform,
                chat_id=chat_id,
                user_id=user_id,
                user_name=user_id,
                is_group=False,
                data={"self_id": self_id, "approved": approve, "comment": event.get("comment", "")},
            )
        )

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

    # -- actions ---------------------------------------------------------------------------
    async def _connection(self, self_id: str, wait: float) -> _Connection:
        """The account's open socket, waiting up to `wait` seconds for it to (re)connect. A
        socket that is closing but not yet dropped counts as gone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            conn = self._conns.get(self_id)
            if conn is not None and not conn.ws.closed:
                return conn
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise NotConnected("action", -1, f"account {self_id} is not connected")
            event = self._connected.setdefault(self_id, asyncio.Event())
            if conn is not None or event.is_set():
                await asyncio.sleep(min(0.05, remaining))  # closing: wait for the drop
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)

    async def call_action(
        self,
        self_id: str,
        action: str,
        params: dict[str, Any],
        *,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        """Call one OneBot action on an account and return its `data`. Waits up to `wait`
        seconds (default `reconnect_wait`) for a dropped account to reconnect. Raises
        ActionError (retcode from the response), ActionTimeout or NotConnected."""
        conn = await self._connection(self_id, self.cfg.reconnect_wait if wait is None else wait)
        echo = f"chatfn-{next(self._echo)}"
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        conn.pending[echo] = fut
        try:
            async with conn.send_lock:
                await conn.ws.send_str(
                    json.dumps(
                        {"action": action, "params": params, "echo": echo}, ensure_ascii=False
                    )
                )
            resp = await asyncio.wait_for(fut, timeout or self.cfg.action_timeout)
        except TimeoutError:
            raise ActionTimeout(action, -1, "no response in time") from None
        except (ConnectionError, RuntimeError, NotConnected) as exc:  # socket closed under us
            err = NotConnected(action, -1, str(exc) or "connection closed")
            err.in_flight = True
            raise err from None
        finally:
            conn.pending.pop(echo, None)
        retcode = resp.get("retcode", 0)
        if resp.get("status") == "failed" or retcode not in (0, 1):
            raise ActionError(
                action,
                int(retcode) if isinstance(retcode, int) else -1,
                str(resp.get("wording") or resp.get("msg") or ""),
            )
        data = resp.get("data")
        return data if isinstance(data, dict) else {}

    # -- outgoing --------------------------------------------------------------------------
    def _self_id_for(self, chat_id: str) -> str:
        """The account that last saw this chat; with none known, the only (or first)
        connected account (a reminder after a restart)."""
        known = self._route.get(chat_id)
        if known is not None:
            return known
        if self._conns:
            return next(iter(self._conns))
        if self._connected:
            return next(iter(self._connected))
        raise DeliveryError(f"no OneBot account has connected yet; message to {chat_id} not sent")

    async def send(self, message: OutgoingMessage) -> None:
        """Unsolicited messages (reminders, welcomes). Raises DeliveryError when the platform
        refused the message twice; a message waiting for its account to reconnect is queued,
        not raised."""
        await self._deliver(self._self_id_for(message.chat_id), message)

    async def _deliver(self, self_id: str, out: OutgoingMessage) -> None:
        kind, _, target = out.chat_id.partition(":")
        if kind not in ("group", "private") or not target:
            raise DeliveryError(f"{out.chat_id!r} is not a OneBot chat id (group:N, private:N)")
        action = "send_group_msg" if kind == "group" else "send_private_msg"
        id_key = "group_id" if kind == "group" else "user_id"

        parts_sent = 0

        async def send_part(text: str, index: int) -> None:
            nonlocal parts_sent
            first = index == 0
            segments = outgoing_segments(
                text,
                at=out.at if first and kind == "group" else None,
                reply_to=out.reply_to if first and out.quote else None,
            )
            params = {id_key: _int(target), "message": segments}
            data = await self._send_with_retry(self_id, action, params, out)
            parts_sent += 1
            if data.get("message_id") is not None:
                self._remember(str(data["message_id"]), f"{self.bot.settings.bot.name}: {text}")

        try:
            await self.outbound.deliver((self_id, out.chat_id), out.text, send_part)
        except NotConnected:
            rest = self.outbound.split(out.text)[parts_sent:]
            self._keep(self_id, replace(out, text="\n".join(rest)) if parts_sent else out)

    async def _send_with_retry(
        self, self_id: str, action: str, params: dict[str, Any], out: OutgoingMessage
    ) -> dict[str, Any]:
        """One send, retried once. A socket that dropped mid-send is retried once the account
        is back (at least once: the implementation may have sent it already); an account that
        stays away raises NotConnected, and the caller keeps the message for its return."""
        try:
            return await self.call_action(self_id, action, params)
        except NotConnected as exc:
            if not exc.in_flight:
                raise
            logger.warning(
                "{} to {}: connection dropped before the answer; resending", action, out.chat_id
            )
            return await self.call_action(self_id, action, params)
        except ActionError as first:
            logger.warning(
                "{} to {} failed (retcode {}): retrying once", action, out.chat_id, first.retcode
            )
            await asyncio.sleep(0.5)
            try:
                return await self.call_action(self_id, action, params)
            except NotConnected:
                raise
            except ActionError as second:
                logger.error(
                    "message to {} not delivered: {} retcode {} then {}: {!r}",
                    out.chat_id,
                    action,
                    first.retcode,
                    second.retcode,
                    out.text[:80],
                )
                raise DeliveryError(str(second)) from second

    def _keep(self, self_id: str, out: OutgoingMessage) -> None:
        if self.cfg.resend_queue == 0:
            logger.error(
                "account {} not connected: message to {} dropped (resend_queue is 0)",
                self_id,
                out.chat_id,
            )
            return
        if len(self._undelivered) >= self.cfg.resend_queue:
            lost = self._undelivered.popleft()
            logger.error("resend queue full: message to {} dropped", lost.out.chat_id)
        self._undelivered.append(_Undelivered(out, self_id, time.monotonic()))
        logger.warning(
            "account {} not connected: message to {} kept until it reconnects", self_id, out.chat_id
        )
        if self_id in self._conns:  # it came back while this send was failing
            self._spawn(self._flush_undelivered(self_id))

    async def _flush_undelivered(self, self_id: str) -> None:
        """Resend, in order, what was kept for an account that just (re)connected."""
        mine = [u for u in self._undelivered if u.self_id == self_id]
        if not mine:
            return
        self._undelivered = deque(u for u in self._undelivered if u.self_id != self_id)
        now = time.monotonic()
        for item in mine:
            if now - item.queued_at > self.cfg.resend_max_age:
                logger.error("message to {} dropped: older than resend_max_age", item.out.chat_id)
                continue
            try:
                await self._deliver(self_id, item.out)
            except DeliveryError:
                pass  # logged
        logger.info("resent {} kept message(s) to account {}", len(mine), self_id)


def _int(value: str) -> int | str:
    """OneBot ids are numbers; keep a non-numeric one (some bridges use strings) as it is."""
    try:
        return int(value)
    except ValueError:
        return value
