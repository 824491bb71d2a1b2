"""A local OneBot v11 implementation, as the bot sees NapCat / LLOneBot / Lagrange: it connects
to the bot's reverse WebSocket, posts events and answers actions.

Event and response shapes follow the OneBot v11 specification's own examples
(event/message.md, event/notice.md, event/request.md, event/meta.md, api/public.md):
every event has `time`, `self_id`, `post_type`; an action is `{"action", "params", "echo"}` and
its response `{"status", "retcode", "data", "echo"}` (retcode 0 ok, 1 async, others failed).

    sim = OneBotSim(url, self_id=10001000, token="secret")
    await sim.connect()
    await sim.group_message(123456, 12345678, [at(10001000), text(" roll a die")])
    action = await sim.wait_action("send_group_msg")
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp

Segment = dict[str, Any]


def text(value: str) -> Segment:
    return {"type": "text", "data": {"text": value}}


def at(qq: int | str) -> Segment:
    return {"type": "at", "data": {"qq": str(qq)}}


def reply(message_id: int | str) -> Segment:
    return {"type": "reply", "data": {"id": str(message_id)}}


def plain(message: Any) -> str:
    """The text of an outgoing `message` (segments or CQ string), mentions as `@qq`."""
    if isinstance(message, str):
        return message
    out = []
    for seg in message:
        if seg["type"] == "text":
            out.append(seg["data"]["text"])
        elif seg["type"] == "at":
            out.append(f"@{seg['data']['qq']}")
    return "".join(out)


class OneBotSim:
    """One bot account of a OneBot v11 implementation, in reverse-WebSocket (Universal) mode."""

    def __init__(
        self,
        url: str,
        self_id: int = 10001000,
        *,
        token: str | None = None,
        token_in: str = "header",
        heartbeat_interval: float = 0.5,
    ) -> None:
        self.url = url
        self.self_id = self_id
        self.token = token
        self.token_in = token_in
        self.heartbeat_interval = heartbeat_interval
        self.actions: list[dict[str, Any]] = []  # every action received, in order
        self.messages: dict[int, dict[str, Any]] = {}  # message id -> event (for get_msg)
        # action name -> retcodes to answer the next calls with (100: bad params, 1200 ...)
        self.fail: dict[str, list[int]] = {}
        self.silent: set[str] = set()  # actions left unanswered (the bot must time out)
        # chat ("group", id) / ("private", id) -> its messages, as get_group_msg_history gives
        # them (incoming and the account's own sends); `history=False`: the implementation
        # lacks the history actions (answers 1404, as Lagrange and LLOneBot builds without them)
        self.history: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.history_supported = True
        # False: no get_recent_contact (1404; go-cqhttp, Lagrange, older NapCat builds)
        self.recent_supported = True
        # action name -> how many of the next calls are carried out but the socket then drops
        # before the answer (the bot cannot know whether they happened)
        self.drop_after: dict[str, int] = {}
        self.drops: list[tuple[int | None, str]] = []  # (close code, exception) per socket end
        self._ids = itertools.count(1001)
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._changed = asyncio.Condition()

    # -- connection --------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._ws is not None and not self._ws.closed

    async def connect(self) -> None:
        """Connect as an implementation does: X-Self-ID, X-Client-Role, the token. Raises
        aiohttp.WSServerHandshakeError when the bot refuses."""
        headers = {
            "X-Self-ID": str(self.self_id),
            "X-Client-Role": "Universal",
            "User-Agent": "OneBot/11",
        }
        url = self.url
        if self.token is not None:
            if self.token_in == "header":
                headers["Authorization"] = f"Bearer {self.token}"
            else:
                url += f"?access_token={self.token}"
        self._session = aiohttp.ClientSession()
        try:
            self._ws = await self._session.ws_connect(url, headers=headers, heartbeat=10)
        except BaseException:
            await self._session.close()
            self._session = None
            raise
        self._tasks = [asyncio.create_task(self._reader()), asyncio.create_task(self._heartbeat())]
        await self.post(self._base("meta_event", meta_event_type="lifecycle", sub_type="connect"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        self._ws = self._session = None

    async def restart(self, downtime: float = 0.2) -> None:
        """The implementation restarts: its socket drops, it comes back after `downtime`."""
        await self.close()
        await asyncio.sleep(downtime)
        await self.connect()

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            await self.post(
                self._base(
                    "meta_event",
                    meta_event_type="heartbeat",
                    status={"online": True, "good": True},
                    interval=int(self.heartbeat_interval * 1000),
                )
            )

    async def _reader(self) -> None:
        assert self._ws is not None
        ws = self._ws
        try:
            await self._read(ws)
        finally:
            # Why the socket ended (a test or the soak reports it): close code and exception.
            self.drops.append((ws.close_code, repr(ws.exception())))

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            request = json.loads(frame.data)
            response = self._answer(request)
            if self.drop_after.get(request.get("action"), 0) > 0:
                # Carried out, but the socket drops before the answer (an implementation
                # restarting at that instant): the bot cannot tell whether it happened.
                self.drop_after[request["action"]] -= 1
                async with self._changed:
                    self.actions.append(request)
                    self._changed.notify_all()
                await ws.close()
                return
            if response is not None:
                await ws.send_str(json.dumps(response, ensure_ascii=False))
            # Recorded once answered, so a test that saw an action can close the socket without
            # leaving the bot waiting for that answer.
            async with self._changed:
                self.actions.append(request)
                self._changed.notify_all()

    # -- actions -----------------------------------------------------------------------------
    def _answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        action, params, echo = request.get("action"), request.get("params", {}), request.get("echo")
        if action in self.silent:
            return None
        if self.fail.get(action):
            code = self.fail[action].pop(0)
            return {
                "status": "failed",
                "retcode": code,
                "data": None,
                "echo": echo,
                "msg": "SEND_MSG_API_ERROR",
                "wording": "simulated failure",
            }
        data: Any = None
        if action in ("send_private_msg", "send_group_msg", "send_msg"):
            data = {"message_id": next(self._ids)}
            self._record_own(action, params, data["message_id"])
        elif action in ("get_group_msg_history", "get_friend_msg_history"):
            if not self.history_supported:
                return self._not_found(action, echo)
            kind, key = (
                ("group", "group_id")
                if action == "get_group_msg_history"
                else ("private", "user_id")
            )
            found = self.history.get((kind, int(params.get(key, 0))), [])
            count = int(params.get("count") or 20)
            data = {"messages": found[-count:]}
        elif action == "get_recent_contact":
            if not self.recent_supported:
                return self._not_found(action, echo)
            data = self._recent_contacts(int(params.get("count") or 10))
        elif action == "get_msg":
            event = self.messages.get(int(params.get("message_id", 0)))
            if event is None:
                return {
                    "status": "failed",
                    "retcode": 100,
                    "data": None,
                    "echo": echo,
                    "msg": "MESSAGE_NOT_FOUND",
                    "wording": "message not found",
                }
            data = {
                "time": event["time"],
                "message_type": event["message_type"],
                "message_id": event["message_id"],
                "real_id": event["message_id"],
                "sender": event["sender"],
                "message": event["message"],
            }
        elif action == "get_login_info":
            data = {"user_id": self.self_id, "nickname": "simbot"}
        elif action == "set_friend_add_request":
            data = None
        else:
            return self._not_found(action, echo)
        return {"status": "ok", "retcode": 0, "data": data, "echo": echo}

    def _recent_contacts(self, count: int) -> list[dict[str, Any]]:
        """NapCat's get_recent_contact: the `count` most recently active chats, newest first,
        each with its latest message (`lastestMsg`, an OneBot message as get_msg gives it;
        NapCat's spelling), `chatType` (NTQQ's: 1 friend, 2 group), `peerUin` and `msgTime`
        (strings, as NTQQ hands them on)."""
        latest = [(chat, messages[-1]) for chat, messages in self.history.items() if messages]
        latest.sort(key=lambda pair: (pair[1]["time"], pair[1]["message_id"]), reverse=True)
        contacts = []
        for (kind, peer), message in latest[:count]:
            sender = message.get("sender", {})
            contacts.append(
                {
                    "lastestMsg": message,
                    "peerUin": str(peer),
                    "remark": "",
                    "msgTime": str(message["time"]),
                    "chatType": 2 if kind == "group" else 1,
                    "msgId": str(message["message_id"]),
                    "sendNickName": sender.get("nickname", ""),
                    "sendMemberName": sender.get("card", ""),
                    "peerName": f"group {peer}" if kind == "group" else sender.get("nickname", ""),
                }
            )
        return contacts

    @staticmethod
    def _not_found(action: Any, echo: Any) -> dict[str, Any]:
        return {
            "status": "failed",
            "retcode": 1404,
            "data": None,
            "echo": echo,
            "msg": "API_NOT_FOUND",
            "wording": f"{action} not implemented",
        }

    def _record_own(self, action: str, params: dict[str, Any], message_id: int) -> None:
        """The account's own message in its chat's history, shaped as NapCat returns it from
        get_group_msg_history (`post_type: "message_sent"`, the account as `user_id`)."""
        group = action == "send_group_msg" or params.get("message_type") == "group"
        target = int(params.get("group_id" if group else "user_id", 0))
        message = params.get("message", "")
        entry: dict[str, Any] = {
            "self_id": self.self_id,
            "user_id": self.self_id,
            "time": int(time.time()),
            "message_id": message_id,
            "real_id": message_id,
            "message_seq": message_id,
            "message_type": "group" if group else "private",
            "sender": {"user_id": self.self_id, "nickname": "simbot", "card": "", "role": "member"},
            "raw_message": message if isinstance(message, str) else _to_cq(message),
            "font": 14,
            "sub_type": "normal" if group else "friend",
            "message": message,
            "message_format": "array" if isinstance(message, list) else "string",
            "post_type": "message_sent",
        }
        if group:
            entry["group_id"] = target
        self.history.setdefault(("group" if group else "private", target), []).append(entry)

    def sent(self, action: str | None = None) -> list[dict[str, Any]]:
        """Actions received (optionally only one kind), in order."""
        return [a for a in self.actions if action is None or a["action"] == action]

    async def wait_actions(
        self,
        count: int,
        action: str | None = None,
        where: Callable[[dict[str, Any]], bool] = lambda a: True,
        timeout: float = 5.0,
    ) -> list[dict[str, Any]]:
        """Wait until at least `count` matching actions arrived; return them all."""

        def matching() -> list[dict[str, Any]]:
            return [a for a in self.sent(action) if where(a)]

        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(matching()) >= count), timeout
            )
        return matching()

    async def wait_action(
        self,
        action: str,
        timeout: float = 5.0,
        where: Callable[[dict[str, Any]], bool] = lambda a: True,
    ) -> dict[str, Any]:
        return (await self.wait_actions(1, action, where, timeout))[-1]

    # -- events ------------------------------------------------------------------------------
    def _base(self, post_type: str, **fields: Any) -> dict[str, Any]:
        return {"time": int(time.time()), "self_id": self.self_id, "post_type": post_type, **fields}

    async def post(self, event: dict[str, Any]) -> None:
        assert self._ws is not None, "not connected"
        with contextlib.suppress(ConnectionResetError):
            await self._ws.send_str(json.dumps(event, ensure_ascii=False))

    def _message_event(
        self,
        message_type: str,
        user_id: int,
        message: list[Segment] | str,
        sender: dict[str, Any],
        **extra: Any,
    ) -> dict[str, Any]:
        message_id = next(self._ids)
        raw = message if isinstance(message, str) else _to_cq(message)
        event = self._base(
            "message",
            message_type=message_type,
            message_id=message_id,
            user_id=user_id,
            message=message,
            raw_message=raw,
            font=0,
            sender=sender,
            **extra,
        )
        self.messages[message_id] = event
        return event

    def _said(self, event: dict[str, Any]) -> None:
        """A message said in its chat: in the chat's history (get_group_msg_history)."""
        kind = event["message_type"]
        chat = (kind, event["group_id"] if kind == "group" else event["user_id"])
        self.history.setdefault(chat, []).append({**event, "message_seq": event["message_id"]})

    async def group_message(
        self,
        group_id: int,
        user_id: int,
        message: list[Segment] | str,
        *,
        nickname: str = "小不点",
        card: str = "",
        role: str = "member",
        deliver: bool = True,
    ) -> dict[str, Any]:
        """event/message.md, 群消息. `deliver=False` only records it in the group's history (said
        while the bot was not connected: implementations do not keep such events)."""
        event = self._message_event(
            "group",
            user_id,
            message,
            {
                "user_id": user_id,
                "nickname": nickname,
                "card": card,
                "sex": "unknown",
                "age": 0,
                "area": "",
                "level": "1",
                "role": role,
                "title": "",
            },
            sub_type="normal",
            group_id=group_id,
            anonymous=None,
        )
        self._said(event)
        if deliver:
            await self.post(event)
        return event

    async def private_message(
        self,
        user_id: int,
        message: list[Segment] | str,
        *,
        nickname: str = "小不点",
        deliver: bool = True,
    ) -> dict[str, Any]:
        """event/message.md, 私聊消息. `deliver=False` only records it (a message sent before
        the bot connected, which `get_msg` can still return)."""
        event = self._message_event(
            "private",
            user_id,
            message,
            {"user_id": user_id, "nickname": nickname, "sex": "unknown", "age": 0},
            sub_type="friend",
        )
        self._said(event)
        if deliver:
            await self.post(event)
        return event

    async def group_increase(
        self, group_id: int, user_id: int, operator_id: int = 0
    ) -> dict[str, Any]:
        """event/notice.md, 群成员增加."""
        event = self._base(
            "notice",
            notice_type="group_increase",
            sub_type="approve",
            group_id=group_id,
            operator_id=operator_id,
            user_id=user_id,
        )
        await self.post(event)
        return event

    async def friend_request(
        self, user_id: int, comment: str = "", flag: str = "flag-1"
    ) -> dict[str, Any]:
        """event/request.md, 加好友请求."""
        event = self._base(
            "request", request_type="friend", user_id=user_id, comment=comment, flag=flag
        )
        await self.post(event)
        return event


def _to_cq(segments: list[Segment]) -> str:
    def esc(value: str, param: bool = False) -> str:
        value = value.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")
        return value.replace(",", "&#44;") if param else value

    out = []
    for seg in segments:
        if seg["type"] == "text":
            out.append(esc(seg["data"]["text"]))
        else:
            params = "".join(f",{k}={esc(str(v), True)}" for k, v in seg["data"].items())
            out.append(f"[CQ:{seg['type']}{params}]")
    return "".join(out)
