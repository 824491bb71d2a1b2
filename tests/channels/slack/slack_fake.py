"""A local Slack for the Slack channel's tests: the Web API methods the channel calls, over
HTTP, and Socket Mode over a WebSocket, with the shapes of Slack's reference
(tests/fixtures/slack/README.md names each page). The real slack_sdk client talks to it
through `channels.slack.api_base`.

- Web API (`POST|GET {base}/api/METHOD`, arguments as query, form or JSON like Slack takes
  them): auth.test, users.info, chat.postMessage, files.getUploadURLExternal (+ the upload URL
  it hands out), files.completeUploadExternal, apps.connections.open. Errors are HTTP 200 with
  `{"ok": false, "error": ...}`; a rate limit is HTTP 429 with `Retry-After`.
- Socket Mode: apps.connections.open (app token) returns `ws://.../link/?ticket=...`; the
  socket says `hello`, then carries `events_api` envelopes. An envelope not acknowledged
  (`{"envelope_id"}`) is sent again on the next connection with `retry_attempt` + 1, as Slack
  does.
- Files users "upload" are served at their `url_private` only with the bot token.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.channels.fake_platform import FakePlatform

BOT_USER = "UBOT"
BOT_ID = "B0BOT"
TEAM = "T0TEAM"
APP = "A0APP"
BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-1-fake-app-token"


@dataclass
class Posted:
    """One message the bot posted, as the fake received it."""

    channel: str
    text: str  # mrkdwn as sent
    thread_ts: str | None
    ts: str
    files: list[bytes] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Envelope:
    envelope_id: str
    payload: dict[str, Any]
    attempt: int = 0
    kind: str = "events_api"


class FakeSlack(FakePlatform):
    client_max_size = 50 * 1024 * 1024

    def __init__(self) -> None:
        super().__init__()
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.users: dict[str, dict[str, Any]] = {}
        self.posted: list[Posted] = []
        self.calls: list[str] = []  # Web API methods called, in order
        self.rate_limited: dict[str, float] = {}  # channel -> Retry-After of its next post
        self.acked: set[str] = set()
        self.connections = 0  # Socket Mode connections opened
        self.link_down = False  # the WebSocket endpoint refuses connections (HTTP 503)
        self._unacked: dict[str, _Envelope] = {}
        self._uploads: dict[str, bytes] = {}
        self._user_files: dict[str, tuple[bytes, str]] = {}
        self._ts = itertools.count(1)

    # -- server --------------------------------------------------------------------------------
    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/api/{method}", self._api)
        router.add_post("/upload/{file_id}", self._upload)
        router.add_get("/link/", self._link)
        router.add_get("/files-pri/{file_id}/{name}", self._file)

    @property
    def api_base(self) -> str:
        return f"{self.base}/api"

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    # -- Web API ---------------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(await request.post())
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.calls.append(method)
        await self.notify()
        if method == "apps.connections.open":
            if token != self.app_token:
                return _err("invalid_auth")
            ticket = uuid.uuid4()
            return web.json_response(
                {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}"}
            )
        if token != self.bot_token:
            return _err("invalid_auth" if token else "not_authed")
        handler = {
            "auth.test": self._auth_test,
            "users.info": self._users_info,
            "chat.postMessage": self._post_message,
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }.get(method)
        if handler is None:
            return _err("unknown_method")
        return await handler(args)

    async def _auth_test(self, _args: dict[str, Any]) -> web.Response:
        # https://api.slack.com/methods/auth.test
        return web.json_response(
            {
                "ok": True,
                "url": "https://fake-team.slack.com/",
                "team": "Fake Team",
                "user": "chatfnbot",
                "team_id": TEAM,
                "user_id": BOT_USER,
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        )

    async def _users_info(self, args: dict[str, Any]) -> web.Response:
        # https://api.slack.com/methods/users.info
        user = str(args.get("user", ""))
        if user not in self.users:
            return _err("user_not_found")
        return web.json_response({"ok": True, "user": self.users[user]})

    def _limited(self, channel: str) -> web.Response | None:
        wait = self.rate_limited.pop(channel, None)
        if wait is None:
            return None
        # https://api.slack.com/apis/rate-limits: HTTP 429 with Retry-After (seconds)
        return web.json_response(
            {"ok": False, "error": "ratelimited"},
            status=429,
            headers={"Retry-After": str(int(wait))},
        )

    async def _post_message(self, args: dict[str, Any]) -> web.Response:
        # https://api.slack.com/methods/chat.postMessage
        channel = str(args.get("channel", ""))
        if not re.match(r"^[CDG][A-Z0-9]+$", channel):
            return _err("channel_not_found")
        if (limited := self._limited(channel)) is not None:
            return limited
        text = str(args.get("text") or "")
        if len(text) > 40000:
            return _err("msg_too_long")
        blocks = args.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if (problem := block_problem(blocks)) is not None:
            return web.json_response({"ok": False, "error": "invalid_blocks", "errors": [problem]})
        ts = self.next_ts()
        thread = args.get("thread_ts") or None
        self.posted.append(Posted(channel, text, thread, ts, blocks=list(blocks)))
        await self.notify()
        return web.json_response(
            {
                "ok": True,
                "channel": channel,
                "ts": ts,
                "message": {
                    "type": "message",
                    "user": BOT_USER,
                    "bot_id": BOT_ID,
                    "text": text,
                    "ts": ts,
                    **({"thread_ts": thread} if thread else {}),
                },
            }
        )

    async def _upload_url(self, args: dict[str, Any]) -> web.Response:
        # https://api.slack.com/methods/files.getUploadURLExternal
        if not args.get("filename") or not str(args.get("length", "")).isdigit():
            return _err("invalid_arguments")
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        return web.json_response(
            {"ok": True, "upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}
        )

    async def _upload(self, request: web.Request) -> web.Response:
        self._uploads[request.match_info["file_id"]] = await request.read()
        return web.Response(text=f"OK - {len(self._uploads[request.match_info['file_id']])}")

    async def _complete_upload(self, args: dict[str, Any]) -> web.Response:
        # https://api.slack.com/methods/files.completeUploadExternal
        files = args.get("files")
        files = json.loads(files) if isinstance(files, str) else files
        channel = str(args.get("channel_id") or "")
        if (limited := self._limited(channel)) is not None:
            return limited
        data = [self._uploads.get(f["id"]) for f in files or []]
        if not files or any(d is None for d in data):
            return _err("file_not_found")
        ts = self.next_ts()
        self.posted.append(
            Posted(
                channel,
                str(args.get("initial_comment") or ""),
                args.get("thread_ts") or None,
                ts,
                files=[d for d in data if d is not None],
            )
        )
        await self.notify()
        return web.json_response(
            {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in files]}
        )

    async def _file(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        found = self._user_files.get(request.match_info["file_id"])
        if found is None:
            return web.Response(status=404)
        if token != self.bot_token:  # Slack answers a login page, not the file
            return web.Response(
                text="<!DOCTYPE html><html>sign in</html>", content_type="text/html"
            )
        return web.Response(body=found[0], content_type=found[1])

    # -- Socket Mode -------------------------------------------------------------------------------
    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        # https://api.slack.com/apis/socket-mode
        if self.link_down:
            raise web.HTTPServiceUnavailable()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP},
            }
        )
        for envelope in list(self._unacked.values()):  # what the last socket left unacked
            envelope.attempt += 1
            await self._send_envelope(ws, envelope)
        await self.notify()
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    ack = json.loads(frame.data)
                    if ack.get("envelope_id") in self._unacked:
                        self.acked.add(ack["envelope_id"])
                        del self._unacked[ack["envelope_id"]]
                        await self.notify()
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            await self.notify()
        return ws

    async def _send_envelope(self, ws: web.WebSocketResponse, envelope: _Envelope) -> None:
        await ws.send_json(
            {
                "envelope_id": envelope.envelope_id,
                "payload": envelope.payload,
                "type": envelope.kind,
                "accepts_response_payload": envelope.kind == "interactive",
                "retry_attempt": envelope.attempt,
                "retry_reason": "timeout" if envelope.attempt else "",
            }
        )

    def callback(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """The Events API's outer event: https://api.slack.com/apis/events-api#callback-field"""
        return {
            "token": "verification-token",
            "team_id": TEAM,
            "api_app_id": APP,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(),
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "team_id": TEAM,
                    "user_id": BOT_USER,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }

    async def push(
        self, payload: dict[str, Any], timeout: float = 15.0, kind: str = "events_api"
    ) -> str:
        """Send an event_callback (or, kind "interactive", an interaction) over Socket Mode
        (waiting for a connection); returns the envelope id. Unacknowledged, it is sent again
        on the next connection."""
        ws = await self.wait_for(
            lambda: next((s for s in self._sockets if not s.closed), None), timeout
        )
        envelope = _Envelope(str(uuid.uuid4()), payload, kind=kind)
        self._unacked[envelope.envelope_id] = envelope
        try:
            await self._send_envelope(ws, envelope)
        except ConnectionError:
            pass  # the socket went: sent again on the next one
        return envelope.envelope_id

    def block_actions(self, user: str, posted: Posted, value: str) -> dict[str, Any]:
        """A press of the button with `value` under a posted message: the `block_actions`
        payload (https://api.slack.com/reference/interaction-payloads/block-actions). Only a
        button the message carries can be pressed."""
        for block in posted.blocks:
            for element in block.get("elements") or []:
                if block.get("type") == "actions" and element.get("value") == value:
                    break
            else:
                continue
            break
        else:
            raise AssertionError(f"no button with value {value!r} under {posted.ts}")
        member = self.users.get(user) or self.user(user)
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": posted.ts,
            "channel_id": posted.channel,
            "is_ephemeral": False,
        }
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": posted.text,
            "ts": posted.ts,
            "blocks": posted.blocks,
        }
        if posted.thread_ts:
            container["thread_ts"] = message["thread_ts"] = posted.thread_ts
        return {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": member["name"],
                "name": member["name"],
                "team_id": TEAM,
            },
            "api_app_id": APP,
            "token": "verification-token",
            "container": container,
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
            "team": {"id": TEAM, "domain": "fake"},
            "channel": {"id": posted.channel, "name": "general"},
            "message": message,
            "response_url": f"{self.base}/actions/{uuid.uuid4().hex}",
            "actions": [
                {
                    "action_id": element["action_id"],
                    "block_id": block.get("block_id") or uuid.uuid4().hex[:5],
                    "text": element["text"],
                    "value": value,
                    "type": "button",
                    "action_ts": self.next_ts(),
                }
            ],
        }

    async def press(self, user: str, posted: Posted, value: str) -> str:
        """A user presses a button over Socket Mode (an `interactive` envelope); returns the
        envelope id (in `acked` once the client acknowledged it)."""
        return await self.push(self.block_actions(user, posted, value), kind="interactive")

    async def drop(self) -> None:
        """Close every Socket Mode connection (as a network drop would)."""
        for ws in list(self._sockets):
            await ws.close(code=1011, message=b"dropped")
        await self.wait_for(lambda: not self._sockets)

    async def disconnect_warning(self) -> None:
        """Slack's `disconnect` envelope (refresh_requested): the client must open a new link."""
        for ws in list(self._sockets):
            await ws.send_json(
                {"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "x"}}
            )

    # -- users and messages ------------------------------------------------------------------------
    def user(self, user_id: str, name: str = "", **flags: bool) -> dict[str, Any]:
        """A workspace member (users.info's `user` object)."""
        name = name or f"user{user_id}"
        entry = {
            "id": user_id,
            "team_id": TEAM,
            "name": name.lower().replace(" ", "."),
            "deleted": False,
            "real_name": name,
            "is_admin": bool(flags.get("is_admin")),
            "is_owner": bool(flags.get("is_owner")),
            "is_primary_owner": bool(flags.get("is_primary_owner")),
            "is_bot": False,
            "profile": {"real_name": name, "display_name": name},
        }
        self.users[user_id] = entry
        return entry

    def add_file(self, data: bytes, mimetype: str = "image/png") -> dict[str, Any]:
        """A file a user shared: the message event's `files` item."""
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        self._user_files[f"{TEAM}-{file_id}"] = (data, mimetype)
        url = f"{self.base}/files-pri/{TEAM}-{file_id}/image.png"
        return {
            "id": file_id,
            "name": "image.png",
            "mimetype": mimetype,
            "filetype": "png",
            "size": len(data),
            "url_private": url,
            "url_private_download": url + "?download=1",
        }

    def message_event(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        kind: str = "message",
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
        ts: str | None = None,
    ) -> dict[str, Any]:
        """https://api.slack.com/events/message (and /events/app_mention)."""
        event: dict[str, Any] = {
            "type": kind,
            "user": user,
            "text": text,
            "ts": ts or self.next_ts(),
            "channel": channel,
            "event_ts": ts or "",
            "team": TEAM,
        }
        event["event_ts"] = event["ts"]
        if kind == "message":
            event["channel_type"] = {"D": "im", "G": "group"}.get(channel[0], "channel")
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["subtype"] = "file_share"
            event["files"] = files
        return event

    def sent_to(self, channel: str) -> list[Posted]:
        return [p for p in self.posted if p.channel == channel]

    async def wait_sent(self, channel: str, count: int, timeout: float = 15.0) -> list[Posted]:
        return await self.wait_for(
            lambda: (got := self.sent_to(channel)) and len(got) >= count and got, timeout
        )


def block_problem(blocks: Any) -> str | None:
    """What Slack's chat.postMessage would refuse in `blocks` (invalid_blocks), or None: the
    fields Block Kit requires of the blocks the bot sends (section, actions, image) and their
    limits (https://api.slack.com/reference/block-kit/blocks)."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "blocks must be a list of at most 50"
    for index, block in enumerate(blocks):
        where = f"[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text")
            if not isinstance(text, dict) or text.get("type") not in ("mrkdwn", "plain_text"):
                return f"{where} section needs a text object"
            if not 1 <= len(str(text.get("text") or "")) <= 3000:
                return f"{where} section text must be 1 to 3000 characters"
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                return f"{where} actions needs 1 to 25 elements"
            ids: set[str] = set()
            for element in elements:
                if not isinstance(element, dict) or element.get("type") != "button":
                    return f"{where} only buttons are known here"
                label = element.get("text")
                if not isinstance(label, dict) or label.get("type") != "plain_text":
                    return f"{where} a button's text must be plain_text"
                if not 1 <= len(str(label.get("text") or "")) <= 75:
                    return f"{where} a button's text must be 1 to 75 characters"
                if len(str(element.get("value", ""))) > 2000:
                    return f"{where} a button's value is at most 2000 characters"
                action = str(element.get("action_id") or "")
                if not action or len(action) > 255 or action in ids:
                    return f"{where} each button needs its own action_id (at most 255)"
                ids.add(action)
        elif kind == "image":
            if not block.get("image_url") or not block.get("alt_text"):
                return f"{where} image needs image_url and alt_text"
        else:
            return f"{where} unknown block type {kind!r}"
    return None


def _err(code: str) -> web.Response:
    return web.json_response({"ok": False, "error": code})


# -- reading what the bot posted -------------------------------------------------------------
_CODE = re.compile(r"```\n?(.*?)\n?```|`([^`\n]+)`", re.S)
_BOLD = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_STRIKE = re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>\s?")


def read_mrkdwn(text: str) -> tuple[str, set[str], list[str], list[str]]:
    """(visible text, styles shown, users mentioned, link URLs) of a mrkdwn text, the way
    Slack's clients show it (https://api.slack.com/reference/surfaces/formatting)."""
    styles: set[str] = set()
    mentions = [m.group(1) for m in _MENTION.finditer(text)]
    text = _MENTION.sub("", text)
    held: list[str] = []

    def hold(value: str) -> str:
        held.append(value)
        return f"\x00{len(held) - 1}\x00"

    def code(m: re.Match[str]) -> str:
        styles.add("code")
        return hold(m.group(1) if m.group(1) is not None else m.group(2))

    text = _CODE.sub(code, text)
    links: list[str] = []

    def link(m: re.Match[str]) -> str:
        styles.add("link")
        links.append(m.group(1))
        return hold(m.group(2) or m.group(1))

    text = _LINK.sub(link, text)
    for pattern, style in ((_BOLD, "bold"), (_ITALIC, "italic"), (_STRIKE, "strike")):
        text, n = pattern.subn(r"\1", text)
        if n:
            styles.add(style)
    for i, value in enumerate(held):
        text = text.replace(f"\x00{i}\x00", value)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text, styles, mentions, links
