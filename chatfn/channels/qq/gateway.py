"""The QQ bot WebSocket gateway (https://bot.q.qq.com/wiki/develop/api-v2/dev-prepare/
interface-framework/event-emit.html#websocket方式): `GET /gateway` gives the URL; the
gateway says Hello (op 10, `heartbeat_interval` in ms); the bot sends Identify (op 2: token
`QQBot {access_token}`, `intents`, `shard` [0, 1]) or, after a drop, Resume (op 6:
`session_id` and the last `s` seen, and QQ sends the events missed, then RESUMED); then
heartbeats (op 1 with the last `s`, acknowledged by op 11) while Dispatch (op 0: `t`, `d`,
`s`, `id`) events come. op 7 (Reconnect) asks for a new connection that resumes; op 9
(Invalid Session) means identify afresh. A heartbeat not acknowledged before the next one
is a dead connection: it is closed and resumed. A close code is handled as QQ's table says
(`close_action`): resume, identify afresh, or stop connecting with one error line.

Tencent announced that the WebSocket way is being retired in favour of webhooks
(channels.qq.mode: webhook); it still serves bots that have no callback URL configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.gateway import RECONNECT, SLOW_DOWN, GatewaySocket, GiveUp
from chatfn.channels.qq.api import ERRORS, FIX, QQApi, QQApiError, QQAuthError
from chatfn.channels.qq.settings import QQSettings

__all__ = ["Gateway"]

Dispatch = Callable[[str, dict[str, Any], str], None]


#: What a close code allows, from QQ's table (bot-docs dev-prepare/error-trace/websocket.md):
#: resume the session, identify afresh, or stop (the code names something to fix).
RESUME, IDENTIFY, STOP = "resume", "identify", "stop"
#: Close codes that name something to fix: one error line and no more connecting (QQ: "请断开
#: 连接"; reconnecting would only be refused again, and 4914/4915 connections are not allowed).
_STOP = {
    4010: "invalid shard: chatfn connects one shard, [0, 1]",
    4011: "the bot is in too many guilds for one connection (sharding required): use "
    "channels.qq.mode: webhook",
    4012: "invalid API version",
    4013: "channels.qq.intents has an invalid bit",
    4014: "the intents ask for events the bot may not subscribe to: set channels.qq.intents "
    "to those it has (e.g. 33554432 = 1<<25 for groups and C2C chats only)",
    4914: "the bot is offline (taken down, in review or not published): only the sandbox is "
    "allowed: check channels.qq.api_base or publish the bot at q.qq.com",
    4915: "the bot is banned: apply to have it unbanned at q.qq.com, then restart",
}
#: 4004: the token was refused (a fresh one, then resume); 4008: payloads too fast (resume after
#: a backoff); 4009: the connection expired (resume); 4000 and codes outside 4000-4999 are
#: drops (network, heartbeat) that resume.
_RESUMABLE = {4000, 4004, 4008, 4009}


def close_action(code: int) -> str:
    """What QQ's table says to do after close code `code`: every other 4xxx (4001/4002 bad
    payload, 4006 invalid session, 4007 bad seq, 4900-4913 internal errors, ...) cannot be
    resumed -- a Resume is closed again ("reset by resume") -- and is identified afresh."""
    if code in _STOP:
        return STOP
    if code in _RESUMABLE or not 4000 <= code <= 4999:
        return RESUME
    return IDENTIFY


class Gateway(GatewaySocket[QQApi, QQSettings, Dispatch]):
    """Holds one gateway session; the kit's `run()` until the channel stops, reconnecting with
    backoff (the channel's: one line per outage) and resuming where it can."""

    platform = "QQ"
    refusals = (QQAuthError,)
    refused = f"QQ refused {ERRORS.credentials} ({{}}): {FIX}"
    api_errors, where = (QQApiError,), "GET /gateway"
    backoff_first = 0.5
    beat_answer, ops = 11, {0: "_dispatch", 1: "_asked", 7: "_reconnect", 9: "_invalid"}

    def setup(self) -> None:
        self.seq: int | None = None

    async def address(self) -> str:
        return self.url_in(await self.api.call("GET", "/gateway"))

    def beat(self) -> dict[str, Any]:
        return {"op": 1, "d": self.seq}

    async def read(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """One connection: Hello, Identify or Resume, heartbeats, events; why it ended."""
        hello = await ws.receive_json(timeout=30)
        if hello.get("op") != 10:
            return f"expected Hello, got op {hello.get('op')}"
        interval = float((hello.get("d") or {}).get("heartbeat_interval") or 41250) / 1000
        token = await self.api.token()
        if self.session_id and self.seq is not None:
            await ws.send_json(
                {
                    "op": 6,
                    "d": {
                        "token": f"QQBot {token}",
                        "session_id": self.session_id,
                        "seq": self.seq,
                    },
                }
            )
        else:
            await ws.send_json(
                {
                    "op": 2,
                    "d": {
                        "token": f"QQBot {token}",
                        "intents": self.cfg.gateway_intents,
                        "shard": [0, 1],
                        "properties": {"$os": "linux", "$browser": "chatfn", "$device": "chatfn"},
                    },
                }
            )
        # a heartbeat not acknowledged before the next one is due: a dead connection
        async with self.beating(self.heartbeat(ws, interval, within=interval)):
            why = await self.follow(kit.json_frames(ws, "QQ gateway"))
            return await self._closed(ws.close_code or 0) if why is None else why

    async def _asked(self, payload: dict[str, Any]) -> None:
        """op 1: QQ asks for a heartbeat now."""
        if self._ws is not None:
            await self._ws.send_json(self.beat())

    def _reconnect(self, payload: dict[str, Any]) -> str:
        return RECONNECT

    def _invalid(self, payload: dict[str, Any]) -> str:
        logger.info("QQ gateway: invalid session: identifying afresh")
        self.session_id, self.seq = None, None
        return "invalid session"

    async def _closed(self, code: int) -> str:
        """Act on a close code as QQ's table says; why the connection ended."""
        action = close_action(code)
        if action == STOP:
            raise GiveUp(f"QQ gateway closed the connection ({code}: {_STOP[code]})")
        if code == 4004:  # the token was refused: a fresh one, then resume
            await self.api.token(fresh=True)
        if action == IDENTIFY and self.session_id:
            logger.info("QQ gateway closed ({}): session not resumable, identifying afresh", code)
            self.session_id, self.seq = None, None
        return SLOW_DOWN if code == 4008 else f"closed ({code})"

    def _dispatch(self, payload: dict[str, Any]) -> None:
        seq = payload.get("s")
        kind = str(payload.get("t") or "")
        data = payload.get("d")
        if kind == "READY" and isinstance(data, dict):
            self.session_id = str(data.get("session_id") or "")
            bot = data.get("user") or {}
            logger.info(
                "QQ gateway ready: bot {} ({}), session {}",
                bot.get("username"),
                bot.get("id"),
                self.session_id,
            )
            self.open()
        elif kind == "RESUMED":
            logger.info("QQ gateway session {} resumed at s={}", self.session_id, self.seq)
            self.open()
        elif isinstance(data, dict):
            self.dispatch(kind, data, str(payload.get("id") or ""))
        if isinstance(seq, int):
            self.seq = seq
