"""The OneBot v11 link: the reverse WebSocket the implementations connect to, one socket per
account, and the request/response half of the protocol (actions with an `echo`, answered on
the same socket). OneBotChannel (chatfn/channels/onebot/channel.py) builds on it; what an event
means, and
what the bot sends, is decided there.

- A reconnecting account replaces its old socket; a socket that drops fails the actions still
  waiting on it with NotConnected (`in_flight`: it was sent, and may have been carried out).
- `call_action` waits up to `reconnect_wait` for an account that is away, then raises.
- Sending is bounded per connection, so an account whose implementation stops reading its
  socket cannot hold the others or the event loop: at most `MAX_QUEUED` frames wait for one
  socket (more are refused at once, NotConnected: the outbox keeps the message and tries again),
  a frame waits at most `action_timeout` to be written, and a socket whose writes do not drain in
  that time (or whose action went unanswered while our own bytes sit unsent) is aborted: its
  messages wait in the outbox until the account reconnects.
- Access: `channels.onebot.access_token` as `Authorization: Bearer|Token <t>` or
  `?access_token=`; 401 without one, 403 with a wrong one (as OneBot v11 specifies).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.peer_socket import NoAnswer, PeerGone, Peers, PeerSocket, token_refusal
from chatfn.channels.onebot.settings import OneBotSettings
from chatfn.runtime.channel_host import ChannelHost, section_of

WS_PATH = "/onebot/v11/ws"
# Frames that may wait to be written to one socket; more are refused (the outbox keeps them).
MAX_QUEUED = 64


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

    @classmethod
    def of(cls, action: str, self_id: str, gone: PeerGone) -> NotConnected:
        err = cls(action, -1, f"account {self_id} {gone}")
        err.in_flight = gone.in_flight
        return err


@dataclass(slots=True, kw_only=True)
class _Connection(PeerSocket):
    self_id: str
    role: str
    heartbeat_interval: float | None = None
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def can_act(self) -> bool:
        return self.role in ("universal", "api")


class OneBotLink(kit.PlatformChannel[OneBotSettings]):
    """Sockets and actions of every connected account; subclasses handle events
    (`_on_event`) and learn of an account coming online (`_on_connected`)."""

    platform = "onebot"
    label = "OneBot"

    def __init__(self, host: ChannelHost, settings: OneBotSettings | None = None) -> None:
        super().__init__(host, settings or section_of(host.settings, "onebot", OneBotSettings))
        # A listener of the bot's web server of its own (`channels.onebot.host`/`port`, set
        # by the channel): the accounts' sockets are served there, and nothing else is.
        self.web = host.web_listener(self.platform)
        for path in (WS_PATH, WS_PATH + "/", WS_PATH + "/api", WS_PATH + "/event"):
            self.web.mount("GET", path, self._ws_handler)
        self._conns: Peers[_Connection] = Peers()
        self._echo = itertools.count(1)

    @property
    def self_ids(self) -> list[str]:
        """Accounts connected right now."""
        return list(self._conns)

    # -- hooks -----------------------------------------------------------------------------
    def _on_event(self, conn: _Connection, event: dict[str, Any]) -> None:
        """One event (a frame with `post_type`) from the account of `conn`."""

    def _on_connected(self, conn: _Connection) -> None:
        """An account that can act (universal or api socket) just connected."""

    # -- connections -----------------------------------------------------------------------
    def _authorised(self, request: web.Request) -> web.Response | None:
        """None when the request may connect, else the refusal: 401 without a token, 403 with a
        wrong one (as OneBot v11 specifies for its own servers)."""
        return token_refusal(request, self.cfg.access_token)

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
        conn = _Connection(
            self_id=self_id,
            ws=ws,
            role=role,
            transport=request.transport,
            name=f"OneBot account {self_id}",
        )
        if conn.can_act:
            old = self._conns.put(self_id, conn)
            if old is not None:
                logger.info("OneBot account {} reconnected; closing its old socket", self_id)
                await old.ws.close()
            self._on_connected(conn)
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
        if self._conns.drop(conn.self_id, conn):
            logger.warning("OneBot account {} disconnected", conn.self_id)
        conn.closed()

    # -- frames ----------------------------------------------------------------------------
    def _on_frame(self, conn: _Connection, raw: str) -> None:
        """One frame; whatever is wrong with it is logged and the frame skipped, so one odd or
        hostile event never closes the account's socket."""
        try:
            self._on_frame_unsafe(conn, raw)
        except (RecursionError, ValueError):
            logger.warning("OneBot account {} sent a frame that is not usable JSON", conn.self_id)
        except Exception as exc:
            logger.warning(
                "OneBot account {} sent a malformed event, skipped: {}: {}",
                conn.self_id,
                type(exc).__name__,
                exc,
            )

    def _on_frame_unsafe(self, conn: _Connection, raw: str) -> None:
        data = json.loads(raw)
        if not isinstance(data, dict):
            return
        if "post_type" in data:
            self._on_event(conn, data)
        elif "echo" in data:
            conn.answered(str(data["echo"]), data)

    # -- actions ---------------------------------------------------------------------------
    async def _can_send(self, self_id: str, action: str) -> None:
        """Wait up to `reconnect_wait` for the account; NotConnected (not in flight) at once
        when it stays away or already has `MAX_QUEUED` frames waiting to be written. A sender
        asks first, so no work (splitting, rendering) is spent on a message the account
        cannot take now: the outbox keeps it."""
        _refuse_if_full(await self._connection(self_id, self.cfg.reconnect_wait), action)

    def _writable(self, self_id: str, action: str) -> None:
        """`_can_send` without the wait: NotConnected unless the account is connected now."""
        conn = self._conns.get(self_id)
        if conn is None:
            raise NotConnected(action, -1, f"account {self_id} is not connected")
        _refuse_if_full(conn, action)

    async def _connection(self, self_id: str, wait: float) -> _Connection:
        """The account's open socket, waiting up to `wait` seconds for it to (re)connect. A
        socket that is closing but not yet dropped counts as gone."""
        conn = await self._conns.wait(self_id, wait)
        if conn is None:
            raise NotConnected("action", -1, f"account {self_id} is not connected")
        return conn

    async def call_action(
        self,
        self_id: str,
        action: str,
        params: dict[str, Any],
        *,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        """Call one OneBot action on an account and return its `data` (an object; {} for
        anything else). Waits up to `wait` seconds (default `reconnect_wait`) for a dropped
        account to reconnect. Raises ActionError (retcode from the response), ActionTimeout
        or NotConnected."""
        data = await self.call_action_raw(self_id, action, params, timeout=timeout, wait=wait)
        return data if isinstance(data, dict) else {}

    async def call_action_raw(
        self,
        self_id: str,
        action: str,
        params: dict[str, Any],
        *,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> Any:
        """call_action, but `data` as the implementation sent it: some actions answer a list
        (NapCat's get_recent_contact)."""
        conn = await self._connection(self_id, self.cfg.reconnect_wait if wait is None else wait)
        echo = f"chatfn-{next(self._echo)}"
        frame = json.dumps({"action": action, "params": params, "echo": echo}, ensure_ascii=False)
        try:
            resp = await conn.request(
                echo,
                frame,
                write_within=self.cfg.action_timeout,
                answer_within=timeout or self.cfg.action_timeout,
                limit=MAX_QUEUED,
            )
        except PeerGone as exc:
            raise NotConnected.of(action, self_id, exc) from None
        except NoAnswer:
            raise ActionTimeout(action, -1, "no response in time") from None
        retcode = resp.get("retcode", 0)
        if resp.get("status") == "failed" or retcode not in (0, 1):
            raise ActionError(
                action,
                int(retcode) if isinstance(retcode, int) else -1,
                str(resp.get("wording") or resp.get("msg") or ""),
            )
        return resp.get("data")


def _refuse_if_full(conn: _Connection, action: str) -> None:
    """NotConnected (not in flight) when `conn` is closed or has `MAX_QUEUED` frames waiting."""
    try:
        conn.check(MAX_QUEUED)
    except PeerGone as exc:
        raise NotConnected.of(action, conn.self_id, exc) from None


def _int(value: str) -> int | str:
    """OneBot ids are numbers; keep a non-numeric one (some bridges use strings) as it is."""
    try:
        return int(value)
    except ValueError:
        return value
