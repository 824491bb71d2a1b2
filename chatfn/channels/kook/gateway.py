"""KOOK's WebSocket gateway (https://developer.kookapp.cn/doc/websocket).

`GET /v3/gateway/index?compress=1` gives the `wss://` URL (it carries the token). Every
server->client frame is then a binary zlib (deflate) frame; the client's frames are not
compressed. Signals (`s`):

- 1 HELLO, within 6 s of connecting: `{"code": 0, "session_id"}`; else 40100 (missing
  parameters), 40101 (invalid token), 40102 (token verification failed): the token is
  refused; 40103 (token expired): connect again from the gateway.
- 0 EVENT `{"d", "sn"}`: read in `sn` order (a gap waits in a buffer, an `sn` read
  already is dropped). What KOOK is told (the `sn` of every ping, of a resume) is `acked`: the
  last `sn` up to which every event was stored (or needs nothing: the dispatch gives no
  `Taken`). KOOK sends again everything after the `sn` a ping or a resume names, so a message
  read but not stored (the process died, its handling failed) comes again; one released by
  the kit (handling failed before the store) is taken again then, one still in hand is not.
- 2 PING `{"s": 2, "sn"}` every 30 s (+-5), answered by 3 PONG within 6 s; a pong that
  does not come: two more pings (after 2 and 4 s), then the connection is given up and
  resumed.
- after a drop, RESUME: connect to the same URL with `resume=1&sn=<last>&session_id=<id>`
  (the docs' older spelling `sessionId` too); KOOK sends the events missed, then 6 RESUME
  ACK. Two resumes that fail: the session is dropped and the gateway asked again.
- 5 RECONNECT (40106 resume failed, 40107 session expired, 40108 sn unknown): the `sn`,
  the session and the buffer are dropped and the gateway is asked again.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
from loguru import logger

from chatfn.channels.intake import Taken
from chatfn.channels.kit.gateway import RECONNECT, GatewaySocket
from chatfn.channels.kook.api import KookApi, KookApiError, KookAuthError
from chatfn.channels.kook.settings import KookSettings
from chatfn.common.payload import object_at

__all__ = ["REFUSED_TOKEN_CODES", "Gateway"]

#: An event to the channel: the kit's Taken of a message to confirm once stored, or None.
Dispatch = Callable[[dict[str, Any]], Taken | None]
#: Told the confirmed position: (session id or None, acked sn), to keep across restarts.
Keep = Callable[[str | None, int], None]
#: HELLO codes of a token KOOK does not take.
REFUSED_TOKEN_CODES = {
    40100: "missing parameters",
    40101: "invalid token",
    40102: "token verification failed",
}
#: RECONNECT / HELLO codes after which the session cannot be resumed.
SESSION_GONE_CODES = {40103, 40106, 40107, 40108}
_CLOSED = (
    aiohttp.WSMsgType.CLOSE,
    aiohttp.WSMsgType.CLOSING,
    aiohttp.WSMsgType.CLOSED,
    aiohttp.WSMsgType.ERROR,
)


class Refused(Exception):
    """HELLO refused the token."""


def decode(frame: aiohttp.WSMessage) -> dict[str, Any] | None:
    """A frame as its JSON object: binary frames inflated (zlib), text frames as they are;
    None for anything else or what does not parse."""
    if frame.type == aiohttp.WSMsgType.BINARY:
        try:
            raw: str | bytes = zlib.decompress(frame.data)
        except zlib.error:
            logger.warning("KOOK gateway frame that is not zlib data ignored")
            return None
    elif frame.type == aiohttp.WSMsgType.TEXT:
        raw = frame.data
    else:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        logger.warning("KOOK gateway frame that is not JSON ignored")
        return None
    return value if isinstance(value, dict) else None


class Gateway(GatewaySocket[KookApi, KookSettings, Dispatch]):
    """One gateway session; the kit's `run()` until the channel stops (module docstring)."""

    platform = "KOOK"
    refusals = (KookAuthError, Refused)
    refused = (
        "KOOK refused channels.kook.token ({}): copy the bot's token from "
        "developer.kookapp.cn -> Applications -> your bot -> Bot"
    )
    api_errors, where = (KookApiError,), "GET /v3/gateway/index"
    max_msg_size = 0
    op_key, beat_answer, ops = "s", 3, {0: "_event", 5: "_reconnect", 6: "_resumed"}
    #: Seconds: HELLO's deadline, the ping interval (+-5 s of jitter), the pong's deadline and
    #: the two pings after a missed pong (tests shorten them).
    hello_timeout = 6.0
    ping_interval = 30.0
    ping_jitter = 5.0
    pong_timeout = 6.0
    retry_pings = (2.0, 4.0)

    def setup(self) -> None:
        self.sn = 0  # the last sn read
        self.acked = 0  # the last sn up to which everything was stored: what KOOK is told
        self.pending: dict[int, Taken | None] = {}  # sn read after `acked` -> its take
        self.keep: Keep | None = None
        self.buffer: dict[int, dict[str, Any]] = {}
        self.url: str | None = None
        self.resumes = 0
        self.failed_resumes = 0

    def forget(self) -> None:
        """Drop the session, its `sn` and what waits in the buffer (RECONNECT)."""
        self.session_id, self.sn, self.acked, self.url = None, 0, 0, None
        self.buffer.clear()
        self.pending.clear()
        if self.keep is not None:
            self.keep(None, 0)

    def resume_from(self, session_id: str, acked: int) -> None:
        """Resume a session kept from before a restart: KOOK sends what came after `acked`."""
        self.session_id, self.sn, self.acked = session_id, acked, acked

    def lost(self, why: str) -> None:
        if self.session_id is not None:
            self.failed_resumes += 1
            if self.failed_resumes > 2:
                logger.info("KOOK gateway: resuming failed twice: a new session")
                self.forget()

    def beat(self) -> dict[str, Any]:
        return {"s": 2, "sn": self.acked}

    async def address(self) -> str:
        """The gateway's URL (asked for unless resuming), with the resume parameters."""
        if self.url is None or self.session_id is None:
            compress = {"compress": int(self.cfg.compress)}
            found = await self.api.call("GET", "/v3/gateway/index", params=compress)
            self.url = self.url_in(found)
        if self.session_id is None:
            return self.url
        self.resumes += 1
        query = {"resume": 1, "sn": self.acked, "session_id": self.session_id}
        query["sessionId"] = self.session_id
        return self.url + ("&" if "?" in self.url else "?") + urlencode(query)

    async def _hello(self, ws: aiohttp.ClientWebSocketResponse) -> str | None:
        """Wait for HELLO: None once the session is open, else why the connection ends."""
        async with asyncio.timeout(self.hello_timeout):
            while True:
                frame = await ws.receive()
                if frame.type in _CLOSED:
                    return f"closed before HELLO ({ws.close_code})"
                payload = decode(frame)
                if payload is not None and payload.get("s") == 1:
                    break
                if payload is not None and payload.get("s") == 5:  # the resume was refused
                    return self._reconnect(payload)
        d = object_at(payload, "d")
        try:
            code = int(d.get("code") or 0)
        except (TypeError, ValueError):
            code = -1
        if code in REFUSED_TOKEN_CODES:
            raise Refused(f"HELLO {code}: {REFUSED_TOKEN_CODES[code]}")
        if code:
            logger.info("KOOK gateway HELLO {}: a new session", code)
            self.forget()
            return RECONNECT if code in SESSION_GONE_CODES else f"HELLO {code}"
        session = str(d.get("session_id") or d.get("sessionId") or "")
        if session != self.session_id:  # a new session: its sn count starts again
            url = self.url
            self.forget()
            self.session_id, self.url = session, url
        return None

    async def read(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        try:
            ended = await self._hello(ws)
        except TimeoutError:
            return f"no HELLO within {self.hello_timeout:g} s"
        if ended is not None:
            return ended
        self.failed_resumes = 0
        self.open()
        heartbeat = self.heartbeat(
            ws, self.ping_interval, self.pong_timeout, self.ping_jitter, self.retry_pings
        )
        async with self.beating(heartbeat):
            why = await self.follow(p async for f in ws if (p := decode(f)) is not None)
            return f"closed ({ws.close_code})" if why is None else why

    def _reconnect(self, payload: dict[str, Any]) -> str:
        d = object_at(payload, "d")
        logger.info("KOOK gateway RECONNECT ({}): a new session", d.get("code"))
        self.forget()
        return RECONNECT

    def _resumed(self, payload: dict[str, Any]) -> None:
        d = object_at(payload, "d")
        self.session_id = str(d.get("session_id") or self.session_id or "")
        logger.info("KOOK gateway session {} resumed at sn {}", self.session_id, self.acked)

    def _event(self, payload: dict[str, Any]) -> None:
        sn, data = payload.get("sn"), payload.get("d")
        if not isinstance(sn, int) or not isinstance(data, dict):
            return
        if sn <= self.sn:
            taken = self.pending.get(sn)
            if taken is not None and taken.done and not taken.confirmed:
                self._take(sn, data)  # released: KOOK's delivery again takes it again
            return  # read already (in hand, or stored)
        self.buffer[sn] = data
        while (self.sn + 1) in self.buffer:
            self.sn += 1
            self._take(self.sn, self.buffer.pop(self.sn))
        self._advance()

    def _take(self, sn: int, data: dict[str, Any]) -> None:
        taken = self.dispatch(data)
        self.pending[sn] = taken
        if taken is not None and not taken.done:
            taken.outcome.add_done_callback(lambda _: self._advance())

    def _advance(self) -> None:
        """Move `acked` over the events stored (or needing nothing), in order."""
        moved = False
        while (self.acked + 1) in self.pending:
            taken = self.pending[self.acked + 1]
            if taken is not None and not taken.confirmed:
                break
            del self.pending[self.acked + 1]
            self.acked += 1
            moved = True
        if moved and self.keep is not None:
            self.keep(self.session_id, self.acked)
