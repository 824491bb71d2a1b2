"""A local Feishu open platform for the Feishu channel's tests: the REST methods the channel
calls, the long connection's WebSocket (protobuf frames, encoded here by hand), and webhook
delivery (encrypted and signed) to a bot's request URL. The real lark-oapi client talks to it
through `channels.feishu.domain`.

Shapes are those of the official reference at open.feishu.cn (open.larksuite.com for Lark):
- auth/v3/tenant_access_token/internal: .../ukTMukTMukTM/ukDNz4SO0MjL5QzM/auth-v3/auth/
  tenant_access_token_internal (`{"code", "msg", "tenant_access_token", "expire"}`)
- bot/v3/info: .../client-docs/bot-v3/obtain-bot-info (`{"code", "msg", "bot": {...}}`)
- im/v1/messages (create, `uuid`: one message per uuid within an hour), .../{message_id}/reply,
  im/v1/images, im/v1/messages/{message_id}/resources/{file_key}, im/v1/chats/{chat_id}:
  .../server-docs/im-v1/message/create, .../message/reply, .../image/create,
  .../message-resource/get, .../chat/get (`data.owner_id`, `data.user_manager_id_list`)
- errors: HTTP 400 with `{"code": 99991663}` for an invalid token, 230002 for a chat the bot
  is not in; rate limits HTTP 429, `{"code": 99991400}` and `x-ogw-ratelimit-reset`
  (.../ukTMukTMukTM/uUzN04SN3QjL1cDN, "frequency control")
- events: im.message.receive_v1 (.../im-v1/message/events/receive) and
  im.chat.member.user.added_v1 (.../im-v1/chat-member/events/added), schema 2.0
- webhook: .../event-subscription-guide/event-subscription-configure-/encrypt-key-encryption-
  configuration-case (AES-256-CBC with SHA-256(encrypt_key), base64(iv + ciphertext);
  X-Lark-Signature = sha256(timestamp + nonce + encrypt_key + body))
- cards (msg_type interactive): card JSON 2.0 (.../feishu-cards/card-json-v2-structure): a
  `body.elements` list; 2.0 has no `action` element (buttons go in `elements`); a `button`
  has a plain_text `text` of 1..100 characters, a `type` of the documented set and
  `behaviors` (`callback` with an object `value`, or `open_url` with a `default_url`)
  (.../card-json-v2-components/interactive-components/button). A card that breaks these is
  refused with 230099 "Failed to create card content", as the real one is (`card_problem`).
- card callbacks: a click is `card.action.trigger` (.../feishu-cards/card-callback-
  communication: `operator`, `token`, `action.value` / `tag`, `context.open_message_id` /
  `open_chat_id`), sent like an event (a data frame of type "event", or "card" as the
  platform has been seen to send it, on the long connection; or POSTed,
  encrypted and signed, to the request URL), and answered within 3 s with `{"toast": {"type",
  "content"}, "card": {"type": "raw", "data": card}}`: the toast is shown to the clicker, the
  card (checked like a sent one) replaces the message's (`click`). PATCH
  im/v1/messages/{message_id} (.../im-v1/message-card/patch) updates a card later, checked
  the same way.
- long connection: the endpoint POST /callback/ws/endpoint ({"AppID", "AppSecret"} ->
  `data.URL`, `data.ClientConfig`) and the `pbbp2.Frame` protobuf (SeqID=1, LogID=2,
  service=3, method=4 [0 control, 1 data], headers=5 {key=1, value=2}, payload=8), as the
  open platform's SDKs speak it (lark-oapi's ws/client.py and pbbp2.proto).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import html
import itertools
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.channels.fake_platform import FakePlatform

BOT_OPEN_ID = "ou_bot0000000000000000000000000001"
BOT_NAME = "chatfnbot"
TENANT = "2ca1d211f64f6438"
MAX_CARD_BYTES = 30 * 1024
CARD_ANSWER_WAIT = 3.0  # the platform waits this long for a card callback's answer
#: Card JSON 2.0 elements the fake renders (the ones chatfn sends, and a few common ones).
CARD_TAGS = {"markdown", "img", "button", "div", "hr", "column_set", "plain_text"}
BUTTON_TYPES = {
    "default",
    "primary",
    "danger",
    "text",
    "primary_text",
    "danger_text",
    "primary_filled",
    "danger_filled",
    "laser",
}


def _button_problem(e: dict[str, Any]) -> str | None:
    text = e.get("text")
    if not isinstance(text, dict) or text.get("tag") not in ("plain_text", "lark_md"):
        return "button text must be a plain_text object"
    label = text.get("content")
    if not isinstance(label, str) or not label or len(label) > 100:
        return "button text content must have 1 to 100 characters"
    if e.get("type", "default") not in BUTTON_TYPES:
        return f"button type {e.get('type')!r} is not supported"
    behaviors = e.get("behaviors")
    if "value" in e and behaviors is None:
        return "JSON 2.0 button interactions go in behaviors, not value"
    if not isinstance(behaviors, list) or not behaviors:
        return "button behaviors must be a non-empty list"
    for b in behaviors:
        if not isinstance(b, dict):
            return "behavior must be an object"
        if b.get("type") == "callback":
            if not isinstance(b.get("value"), dict):
                return "callback behavior value must be an object"
        elif b.get("type") == "open_url":
            if not isinstance(b.get("default_url"), str):
                return "open_url behavior needs default_url"
        else:
            return f"behavior type {b.get('type')!r} is not supported"
    return None


def card_problem(card: Any) -> str | None:
    """Why the platform would refuse this card JSON (module docstring), or None."""
    if not isinstance(card, dict):
        return "card is not a JSON object"
    if card.get("schema") != "2.0":
        elements = card.get("elements")
        return None if isinstance(elements, list) else "card JSON 1.0 needs an elements list"
    body = card.get("body")
    elements = body.get("elements") if isinstance(body, dict) else None
    if not isinstance(elements, list):
        return "card JSON 2.0 needs body.elements"
    for e in elements:
        if not isinstance(e, dict) or not isinstance(e.get("tag"), str):
            return "element without a tag"
        tag = e["tag"]
        if tag == "action":
            return "card JSON 2.0 does not support the action element"
        if tag not in CARD_TAGS:
            return f"unknown element tag {tag!r}"
        if tag == "markdown" and not isinstance(e.get("content"), str):
            return "markdown content must be a string"
        if tag == "img" and not isinstance(e.get("img_key"), str):
            return "img needs img_key"
        if tag == "button" and (problem := _button_problem(e)) is not None:
            return problem
    return None


@dataclass
class Posted:
    """One message the bot sent, as the fake received it."""

    chat_id: str
    msg_type: str
    content: dict[str, Any]
    message_id: str
    uuid: str
    parent_id: str = ""
    image: bytes | None = None  # an image message's uploaded bytes
    thread: str = ""  # the thread's root message, for a reply sent with reply_in_thread


@dataclass
class UserMessage:
    chat_id: str
    message_id: str
    resources: dict[str, bytes] = field(default_factory=dict)
    thread_root: str = ""


# -- protobuf, by hand (pbbp2.Frame) ---------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def encode_frame(
    *,
    method: int,
    service: int,
    headers: list[tuple[str, str]],
    payload: bytes | None = None,
    seq: int = 0,
    log: int = 0,
) -> bytes:
    out = _field(1, seq) + _field(2, log) + _field(3, service) + _field(4, method)
    for key, value in headers:
        out += _field(5, _field(1, key.encode()) + _field(2, value.encode()))
    if payload is not None:
        out += _field(8, payload)
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _read_varint(data, i)
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise ValueError(f"wire type {wire} not in pbbp2.Frame")
    return out


def decode_frame(data: bytes) -> dict[str, Any]:
    frame: dict[str, Any] = {"headers": {}, "payload": b""}
    for number, value in _fields(data):
        if number == 4:
            frame["method"] = value
        elif number == 3:
            frame["service"] = value
        elif number == 5 and isinstance(value, bytes):
            pair = {n: v for n, v in _fields(value)}
            frame["headers"][bytes(pair[1]).decode()] = bytes(pair.get(2, b"")).decode()
        elif number == 8:
            frame["payload"] = value
    return frame


# -- webhook crypto (independent of the SDK's AESCipher) -------------------------------------
def encrypt(encrypt_key: str, plaintext: str) -> str:
    from Crypto.Cipher import AES

    key = hashlib.sha256(encrypt_key.encode()).digest()
    iv = os.urandom(16)
    data = plaintext.encode()
    pad = 16 - len(data) % 16
    cipher = AES.new(key, AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(data + bytes([pad]) * pad)).decode()


def sign(encrypt_key: str, stamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((stamp + nonce + encrypt_key).encode() + body).hexdigest()


class FakeFeishu(FakePlatform):
    def __init__(self, *, verification_token: str = "v-token-fake", encrypt_key: str = "") -> None:
        super().__init__()
        self.app_id = "cli_fake" + uuid.uuid4().hex[:10]
        self.app_secret = "secret-" + uuid.uuid4().hex[:12]
        self.verification_token = verification_token
        self.encrypt_key = encrypt_key
        self.token_ttl = 7200
        self.tokens: dict[str, float] = {}  # token -> expiry (monotonic)
        self.tokens_issued = 0
        self.posted: list[Posted] = []
        self.calls: list[str] = []
        self.rate_limited: dict[str, float] = {}  # chat_id -> wait of its next send
        self.broken: dict[str, int] = {}  # chat_id -> HTTP status of its next send (5xx)
        self.chats: dict[str, dict[str, Any]] = {}
        self.user_messages: dict[str, UserMessage] = {}
        self.images: dict[str, bytes] = {}
        # im/v1/files uploads: file_key -> (file_type, bytes, duration in ms as sent).
        self.files: dict[str, tuple[str, bytes, str]] = {}
        self.names: dict[str, str] = {}  # open_id -> the user's name
        self.acked: list[str] = []  # message_id headers of event frames answered
        self.answers: dict[str, int] = {}  # message_id header -> the answer's code (200, 500)
        # message_id header -> the answer frame's `type` header (it answers as it was sent).
        self.answer_types: dict[str, str] = {}
        # message_id header -> a callback answer frame's `data` (its JSON, decoded).
        self.answer_data: dict[str, Any] = {}
        # Card callbacks: what each click's clicker was shown (open_id, toast or None).
        self.toasts: list[tuple[str, dict[str, Any] | None]] = []
        self.connections = 0
        self.pings = 0
        self.link_down = False
        self.webhook_url = ""  # set: events are POSTed there instead of the long connection
        self.webhook_answers: list[int] = []
        self._by_uuid: dict[str, tuple[float, Posted]] = {}
        self._ids = itertools.count(1)

    # -- server ----------------------------------------------------------------------------
    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        r.add_get("/open-apis/bot/v3/info", self._bot_info)
        r.add_post("/open-apis/im/v1/messages", self._create)
        r.add_post("/open-apis/im/v1/messages/{message_id}/reply", self._reply)
        r.add_patch("/open-apis/im/v1/messages/{message_id}", self._patch)
        r.add_post("/open-apis/im/v1/images", self._upload)
        r.add_post("/open-apis/im/v1/files", self._upload_file)
        r.add_get("/open-apis/im/v1/messages/{message_id}/resources/{key}", self._resource)
        r.add_get("/open-apis/im/v1/chats/{chat_id}", self._chat)
        r.add_get("/open-apis/im/v1/chats/{chat_id}/members", self._members)
        r.add_post("/callback/ws/endpoint", self._endpoint)
        r.add_get("/ws", self._ws)

    @property
    def domain(self) -> str:
        return self.base

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}{uuid.uuid4().hex[:20]}"

    # -- auth --------------------------------------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        self.calls.append("tenant_access_token")
        body = await request.json()
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return _err(10014, "app secret invalid", 400)
        token = "t-" + uuid.uuid4().hex
        self.tokens[token] = time.monotonic() + self.token_ttl
        self.tokens_issued += 1
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.token_ttl}
        )

    def revoke_tokens(self) -> None:
        """Every token issued so far stops working (as a platform-side revocation would)."""
        self.tokens.clear()

    def _authorized(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:]:
            return _err(99991661, "Missing access token for authorization.", 400)
        expiry = self.tokens.get(auth[7:])
        if expiry is None or expiry < time.monotonic():
            return _err(
                99991663,
                "Invalid access token for authorization. Please make a request with token "
                "attached.",
                400,
            )
        return None

    async def _bot_info(self, request: web.Request) -> web.Response:
        self.calls.append("bot_info")
        if (refused := self._authorized(request)) is not None:
            return refused
        return web.json_response(
            {
                "code": 0,
                "msg": "ok",
                "bot": {
                    "activate_status": 2,
                    "app_name": BOT_NAME,
                    "avatar_url": "https://s1-imfile.feishucdn.com/static-resource/v1/x",
                    "ip_white_list": [],
                    "open_id": BOT_OPEN_ID,
                },
            }
        )

    # -- messages ----------------------------------------------------------------------------
    def _limited(self, chat_id: str) -> web.Response | None:
        wait = self.rate_limited.pop(chat_id, None)
        if wait is None:
            return None
        return web.json_response(
            {"code": 99991400, "msg": "request trigger frequency limit"},
            status=429,
            headers={"x-ogw-ratelimit-limit": "5", "x-ogw-ratelimit-reset": str(int(wait))},
        )

    def _message_data(self, p: Posted) -> dict[str, Any]:
        now = str(int(time.time() * 1000))
        return {
            "message_id": p.message_id,
            "root_id": p.parent_id,
            "parent_id": p.parent_id,
            "msg_type": p.msg_type,
            "create_time": now,
            "update_time": now,
            "deleted": False,
            "updated": False,
            "chat_id": p.chat_id,
            "sender": {
                "id": self.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": TENANT,
            },
            "body": {"content": json.dumps(p.content, ensure_ascii=False)},
        }

    async def _post(
        self, chat_id: str, body: dict[str, Any], parent: str = "", thread: str = ""
    ) -> web.Response:
        msg_type = str(body.get("msg_type") or "")
        raw = str(body.get("content") or "")
        key = str(body.get("uuid") or "")
        if len(key) > 50:
            return _err(99992402, "field validation failed: uuid longer than 50", 400)
        if msg_type not in ("text", "post", "image", "interactive", "audio"):
            return _err(230001, f"invalid msg_type {msg_type!r}", 400)
        if msg_type in ("post", "interactive") and len(raw.encode()) > MAX_CARD_BYTES:
            return _err(230025, "The length of the message content reaches its limit.", 400)
        try:
            content = json.loads(raw)
        except ValueError:
            return _err(230001, "content is not valid JSON", 400)
        if key and key in self._by_uuid and self._by_uuid[key][0] > time.monotonic():
            first = self._by_uuid[key][1]  # at most one message per uuid within an hour
            return web.json_response(
                {"code": 0, "msg": "success", "data": self._message_data(first)}
            )
        if (limited := self._limited(chat_id)) is not None:
            return limited
        if (status := self.broken.pop(chat_id, None)) is not None:
            if status == 500:  # the platform's own failure: JSON with an error code
                return _err(1000004, "internal error, please retry", 500)
            return web.Response(status=status, text="upstream connect error")
        if msg_type == "interactive":
            if (problem := card_problem(content)) is not None:
                return _err(230099, f"Failed to create card content: {problem}", 400)
            elements = (content.get("body") or {}).get("elements") or []
            for e in elements:
                if (
                    isinstance(e, dict)
                    and e.get("tag") == "img"
                    and e.get("img_key") not in self.images
                ):
                    return _err(230099, "Failed to create card content: invalid img_key", 400)
        if msg_type == "audio":
            uploaded = self.files.get(str(content.get("file_key") or ""))
            if uploaded is None or uploaded[0] != "opus":
                return _err(230001, "invalid file_key for an audio message", 400)
        image = None
        if msg_type == "image":
            image = self.images.get(str(content.get("image_key") or ""))
            if image is None:
                return _err(230001, "invalid image_key", 400)
        posted = Posted(chat_id, msg_type, content, self.next_id("om"), key, parent, image, thread)
        self.posted.append(posted)
        if key:
            self._by_uuid[key] = (time.monotonic() + 3600, posted)
        await self.notify()
        return web.json_response({"code": 0, "msg": "success", "data": self._message_data(posted)})

    async def _create(self, request: web.Request) -> web.Response:
        self.calls.append("messages.create")
        if (refused := self._authorized(request)) is not None:
            return refused
        if request.query.get("receive_id_type") != "chat_id":
            return _err(99992402, "field validation failed: receive_id_type", 400)
        body = await request.json()
        chat_id = str(body.get("receive_id") or "")
        if chat_id not in self.chats:
            return _err(230002, "Bot/User can NOT be out of the chat.", 400)
        return await self._post(chat_id, body)

    async def _patch(self, request: web.Request) -> web.Response:
        """Update a card the bot sent (.../im-v1/message-card/patch): only an interactive
        message of this app, with a card the platform takes; shown to everyone."""
        self.calls.append("messages.patch")
        if (refused := self._authorized(request)) is not None:
            return refused
        message_id = request.match_info["message_id"]
        posted = next((p for p in self.posted if p.message_id == message_id), None)
        if posted is None:
            return _err(230001, "invalid message_id", 400)
        if posted.msg_type != "interactive":
            return _err(230001, "only a card message can be updated", 400)
        try:
            content = json.loads(str((await request.json()).get("content") or ""))
        except ValueError:
            return _err(230001, "content is not valid JSON", 400)
        if (problem := card_problem(content)) is not None:
            return _err(230099, f"Failed to create card content: {problem}", 400)
        posted.content = content
        await self.notify()
        return web.json_response({"code": 0, "msg": "success", "data": {}})

    async def _reply(self, request: web.Request) -> web.Response:
        self.calls.append("messages.reply")
        if (refused := self._authorized(request)) is not None:
            return refused
        parent = self.user_messages.get(request.match_info["message_id"])
        if parent is None:
            return _err(230011, "The message was withdrawn.", 400)
        body = await request.json()
        thread = (parent.thread_root or parent.message_id) if body.get("reply_in_thread") else ""
        return await self._post(parent.chat_id, body, parent.message_id, thread)

    async def _upload(self, request: web.Request) -> web.Response:
        self.calls.append("images.create")
        if (refused := self._authorized(request)) is not None:
            return refused
        form = await request.post()
        image = form.get("image")
        if form.get("image_type") != "message" or not hasattr(image, "file"):
            return _err(234001, "Invalid request param.", 400)
        data = image.file.read()  # type: ignore[union-attr]
        key = self.next_id("img_v3")
        self.images[key] = data
        return web.json_response({"code": 0, "msg": "success", "data": {"image_key": key}})

    async def _upload_file(self, request: web.Request) -> web.Response:
        """im/v1/files: `file_type` opus for audio, which Feishu takes only as OGG/Opus ("other
        audio formats: convert to opus first"); `duration` in milliseconds."""
        self.calls.append("files.create")
        if (refused := self._authorized(request)) is not None:
            return refused
        form = await request.post()
        upload = form.get("file")
        kinds = ("opus", "mp4", "pdf", "doc", "xls", "ppt", "stream")
        if form.get("file_type") not in kinds or not form.get("file_name"):
            return _err(234001, "Invalid request param.", 400)
        if not hasattr(upload, "file"):
            return _err(234001, "Invalid request param.", 400)
        data = upload.file.read()  # type: ignore[union-attr]
        if form.get("file_type") == "opus" and not (
            data.startswith(b"OggS") and b"OpusHead" in data[:200]
        ):
            return _err(234011, "Can't recognize the file format.", 400)
        key = self.next_id("file_v3")
        self.files[key] = (str(form.get("file_type")), data, str(form.get("duration") or ""))
        return web.json_response({"code": 0, "msg": "success", "data": {"file_key": key}})

    async def _resource(self, request: web.Request) -> web.Response:
        self.calls.append("messages.resources")
        if (refused := self._authorized(request)) is not None:
            return refused
        message = self.user_messages.get(request.match_info["message_id"])
        data = message.resources.get(request.match_info["key"]) if message else None
        # Feishu: type=image for an image's key, type=file for a file's, audio's or media's.
        wanted = "file" if request.match_info["key"].startswith("file_") else "image"
        if data is None or request.query.get("type") != wanted:
            return _err(234003, "File not in msg.", 400)
        name = "audio.opus" if wanted == "file" else "image.png"
        return web.Response(
            body=data,
            content_type="application/octet-stream" if wanted == "file" else "image/png",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    async def _chat(self, request: web.Request) -> web.Response:
        self.calls.append("chats.get")
        if (refused := self._authorized(request)) is not None:
            return refused
        chat = self.chats.get(request.match_info["chat_id"])
        if chat is None:
            return _err(232011, "Operator can NOT be out of the chat.", 400)
        return web.json_response(
            {
                "code": 0,
                "msg": "success",
                "data": {
                    "avatar": "https://s1-imfile.feishucdn.com/static-resource/v1/y",
                    "name": chat["name"],
                    "description": "",
                    "add_member_permission": "all_members",
                    "share_card_permission": "allowed",
                    "at_all_permission": "all_members",
                    "edit_permission": "all_members",
                    "owner_id_type": "open_id",
                    "owner_id": chat["owner_id"],
                    "user_manager_id_list": list(chat["managers"]),
                    "bot_manager_id_list": [],
                    "chat_mode": "group" if chat["group"] else "p2p",
                    "chat_type": "private",
                    "chat_tag": "inner",
                    "external": False,
                    "tenant_key": TENANT,
                    "user_count": "3",
                    "bot_count": "1",
                },
            }
        )

    async def _members(self, request: web.Request) -> web.Response:
        self.calls.append("chats.members")
        if (refused := self._authorized(request)) is not None:
            return refused
        chat = self.chats.get(request.match_info["chat_id"])
        if chat is None:
            return _err(232011, "Operator can NOT be out of the chat.", 400)
        if request.query.get("member_id_type") != "open_id":
            return _err(99992402, "field validation failed: member_id_type", 400)
        members = sorted(chat["members"])
        size = int(request.query.get("page_size") or 20)
        start = int(request.query.get("page_token") or 0)
        page = members[start : start + size]
        more = start + size < len(members)
        return web.json_response(
            {
                "code": 0,
                "msg": "success",
                "data": {
                    "items": [
                        {
                            "member_id_type": "open_id",
                            "member_id": m,
                            "name": self.names.get(m, f"Person {m}"),
                            "tenant_key": TENANT,
                        }
                        for m in page
                    ],
                    "page_token": str(start + size) if more else "",
                    "has_more": more,
                    "member_total": len(members),
                },
            }
        )

    def chat(self, chat_id: str, *, group: bool, owner: str = "ou_owner") -> dict[str, Any]:
        """A chat the bot is in (its owner and managers are what im/v1/chats reports, its
        members what im/v1/chats/{chat_id}/members lists)."""
        return self.chats.setdefault(
            chat_id,
            {
                "name": f"chat {chat_id}",
                "owner_id": owner,
                "managers": [],
                "group": group,
                "members": {owner},
            },
        )

    # -- the long connection -------------------------------------------------------------------
    async def _endpoint(self, request: web.Request) -> web.Response:
        self.calls.append("ws.endpoint")
        if self.link_down:
            return web.json_response({"code": 1, "msg": "system busy"}, status=503)
        body = await request.json()
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"})
        return web.json_response(
            {
                "code": 0,
                "msg": "ok",
                "data": {
                    "URL": f"ws://127.0.0.1:{self.port}/ws?device_id={uuid.uuid4().hex[:12]}"
                    f"&service_id=7&ticket={uuid.uuid4().hex}",
                    "ClientConfig": {
                        "ReconnectCount": -1,
                        "ReconnectInterval": 1,
                        "ReconnectNonce": 0,
                        "PingInterval": 120,
                    },
                },
            }
        )

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        if self.link_down:
            raise web.HTTPServiceUnavailable()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        await self.notify()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                frame = decode_frame(msg.data)
                kind = frame["headers"].get("type")
                if frame.get("method") == 0 and kind == "ping":
                    self.pings += 1
                    await ws.send_bytes(
                        encode_frame(method=0, service=7, headers=[("type", "pong")])
                    )
                elif frame.get("method") == 1:
                    message_id = frame["headers"].get("message_id", "")
                    self.acked.append(message_id)
                    self.answer_types[message_id] = frame["headers"].get("type", "")
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        answer = json.loads(frame["payload"])
                        if answer.get("data"):
                            data = base64.b64decode(answer["data"])
                            self.answer_data[message_id] = json.loads(data)
                        self.answers[message_id] = int(answer["code"])
                    await self.notify()
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            await self.notify()
        return ws

    async def drop(self) -> None:
        """Close every long connection (as a network drop would)."""
        for ws in list(self._sockets):
            await ws.close(code=1011, message=b"dropped")
        await self.wait_for(lambda: not self._sockets)

    # -- events ------------------------------------------------------------------------------
    def envelope(
        self, event_type: str, event: dict[str, Any], event_id: str = ""
    ) -> dict[str, Any]:
        return {
            "schema": "2.0",
            "header": {
                "event_id": event_id or uuid.uuid4().hex,
                "event_type": event_type,
                "create_time": str(int(time.time() * 1000)),
                "token": self.verification_token,
                "app_id": self.app_id,
                "tenant_key": TENANT,
            },
            "event": event,
        }

    def message_event(
        self,
        chat_id: str,
        sender: str,
        *,
        group: bool,
        text: str = "",
        mentions: list[dict[str, Any]] | None = None,
        images: list[bytes] | None = None,
        message_id: str = "",
        thread_root: str = "",
        voice: bytes | None = None,
    ) -> dict[str, Any]:
        """im.message.receive_v1: a `text` message, or a `post` when it carries images;
        `thread_root`: a message in the thread under that (user) message."""
        self.chat(chat_id, group=group)["members"].add(sender)
        message_id = message_id or self.next_id("om")
        record = self.user_messages.setdefault(
            message_id, UserMessage(chat_id, message_id, thread_root=thread_root)
        )
        if images:
            keys = []
            for data in images:
                key = self.next_id("img_v3")
                record.resources[key] = data
                keys.append(key)
            paragraphs: list[list[dict[str, Any]]] = []
            if text:
                paragraphs.append([{"tag": "text", "text": text, "style": []}])
            paragraphs += [[{"tag": "img", "image_key": k, "width": 1, "height": 1}] for k in keys]
            kind, content = "post", {"title": "", "content": paragraphs}
        elif voice is not None:  # an audio message: Ogg/Opus, fetched with type=file
            key = self.next_id("file_v3")
            record.resources[key] = voice
            kind, content = "audio", {"file_key": key, "duration": 2000}
        else:
            kind, content = "text", {"text": text}
        now = str(int(time.time() * 1000))
        return self.envelope(
            "im.message.receive_v1",
            {
                "sender": {
                    "sender_id": {
                        "union_id": "on_" + sender[3:],
                        "user_id": sender[3:],
                        "open_id": sender,
                    },
                    "sender_type": "user",
                    "tenant_key": TENANT,
                },
                "message": {
                    "message_id": message_id,
                    "root_id": thread_root,
                    "parent_id": thread_root,
                    "create_time": now,
                    "update_time": now,
                    "chat_id": chat_id,
                    "thread_id": "omt_" + thread_root[3:] if thread_root else "",
                    "chat_type": "group" if group else "p2p",
                    "message_type": kind,
                    "content": json.dumps(content, ensure_ascii=False),
                    "mentions": mentions or [],
                    "user_agent": "Mozilla/5.0 Lark/7.30.0",
                },
            },
        )

    def member_added_event(self, chat_id: str, users: list[tuple[str, str]]) -> dict[str, Any]:
        members = self.chat(chat_id, group=True)["members"]
        for uid, name in users:
            members.add(uid)
            self.names[uid] = name
        return self.envelope(
            "im.chat.member.user.added_v1",
            {
                "chat_id": chat_id,
                "operator_id": {"union_id": "on_op", "user_id": "op", "open_id": "ou_operator"},
                "external": False,
                "operator_tenant_key": TENANT,
                "users": [
                    {
                        "name": name,
                        "tenant_key": TENANT,
                        "user_id": {
                            "union_id": "on_" + uid[3:],
                            "user_id": uid[3:],
                            "open_id": uid,
                        },
                    }
                    for uid, name in users
                ],
                "name": f"chat {chat_id}",
                "i18n_names": {"zh_cn": "群", "en_us": "group", "ja_jp": ""},
            },
        )

    def card_action_event(
        self, user: str, posted: Posted, value: dict[str, Any], event_id: str = ""
    ) -> dict[str, Any]:
        """card.action.trigger: `user` clicked a button of `posted` whose value is `value`."""
        return self.envelope(
            "card.action.trigger",
            {
                "operator": {
                    "tenant_key": TENANT,
                    "user_id": user[3:],
                    "open_id": user,
                    "union_id": "on_" + user[3:],
                },
                "token": "c-" + uuid.uuid4().hex,
                "action": {"value": value, "tag": "button"},
                "host": "im_message",
                "context": {"open_message_id": posted.message_id, "open_chat_id": posted.chat_id},
            },
            event_id,
        )

    async def click(
        self,
        user: str,
        posted: Posted,
        label: str,
        *,
        card: dict[str, Any] | None = None,
        event_id: str = "",
        frame_type: str = "event",
    ) -> dict[str, Any]:
        """`user` clicks the button labelled `label` of the message `posted` (as it shows now,
        or as `card` showed it: a client that had not yet seen an update). The callback goes
        the way events go; the answer must come within 3 s (TimeoutError otherwise, as the
        client then shows an error). Its card, when there is one, must be one the platform
        takes (AssertionError otherwise) and replaces the message's for everyone. Returns the
        answer; its toast is also kept in `toasts`."""
        shown = card if card is not None else posted.content
        elements = (shown.get("body") or {}).get("elements") or []
        [button] = [
            e
            for e in elements
            if e.get("tag") == "button" and (e.get("text") or {}).get("content") == label
        ]
        [value] = [b["value"] for b in button["behaviors"] if b.get("type") == "callback"]
        payload = self.card_action_event(user, posted, value, event_id)
        if self.webhook_url:
            async with asyncio.timeout(CARD_ANSWER_WAIT):
                status, answer = await self.post_webhook(payload)
            assert status == 200, (status, answer)
        else:
            frame_id = await self.push(payload, frame_type=frame_type)
            await self.wait_for(lambda: frame_id in self.answers, CARD_ANSWER_WAIT)
            assert self.answer_types[frame_id] == frame_type, self.answer_types[frame_id]
            assert self.answers[frame_id] == 200, self.answers[frame_id]
            answer = self.answer_data.get(frame_id, {})
        assert isinstance(answer, dict), answer
        toast = answer.get("toast")
        self.toasts.append((user, toast if isinstance(toast, dict) else None))
        if "card" in answer:
            update = answer["card"]
            assert isinstance(update, dict) and update.get("type") == "raw", update
            problem = card_problem(update.get("data"))
            assert problem is None, f"the platform refuses the card update: {problem}"
            posted.content = update["data"]
        await self.notify()
        return answer

    async def push(
        self, payload: dict[str, Any], timeout: float = 15.0, *, frame_type: str = "event"
    ) -> str:
        """Deliver an event: POSTed to `webhook_url` (encrypted and signed when the fake has an
        encrypt_key), or as a data frame on the long connection (waiting for one). Returns
        the frame's message_id header (the key of `answers`; "" for a webhook)."""
        if self.webhook_url:
            await self.post_webhook(payload)
            return ""
        frame_id = uuid.uuid4().hex
        ws = await self.wait_for(
            lambda: next((s for s in self._sockets if not s.closed), None), timeout
        )
        frame = encode_frame(
            method=1,
            service=7,
            seq=next(self._ids),
            log=next(self._ids),
            headers=[
                ("type", frame_type),
                ("message_id", frame_id),
                ("trace_id", uuid.uuid4().hex),
                ("sum", "1"),
                ("seq", "0"),
            ],
            payload=json.dumps(payload, ensure_ascii=False).encode(),
        )
        await ws.send_bytes(frame)
        return frame_id

    async def post_webhook(
        self, payload: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        body, extra = self.webhook_body(payload)
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                self.webhook_url, data=body, headers={**extra, **(headers or {})}
            ) as response,
        ):
            self.webhook_answers.append(response.status)
            return response.status, await response.json(content_type=None)

    def webhook_body(self, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        plain = json.dumps(payload, ensure_ascii=False)
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if not self.encrypt_key:
            return plain.encode(), headers
        body = json.dumps({"encrypt": encrypt(self.encrypt_key, plain)}).encode()
        if payload.get("type") != "url_verification":
            stamp, nonce = str(int(time.time())), uuid.uuid4().hex[:16]
            headers.update(
                {
                    "X-Lark-Request-Timestamp": stamp,
                    "X-Lark-Request-Nonce": nonce,
                    "X-Lark-Signature": sign(self.encrypt_key, stamp, nonce, body),
                }
            )
        return body, headers

    # -- what the bot sent ---------------------------------------------------------------------
    def sent_to(self, chat_id: str) -> list[Posted]:
        return [p for p in self.posted if p.chat_id == chat_id]

    async def wait_sent(self, chat_id: str, count: int, timeout: float = 15.0) -> list[Posted]:
        return await self.wait_for(
            lambda: (got := self.sent_to(chat_id)) and len(got) >= count and got, timeout
        )


def _err(code: int, msg: str, status: int = 400) -> web.Response:
    return web.json_response({"code": code, "msg": msg}, status=status)


# -- reading what the bot sent ---------------------------------------------------------------
_AT = re.compile(r"<at id=([A-Za-z0-9_\-]+)></at>\s?")
_CODE = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)\n```|`([^`\n]+)`", re.S)
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")


def card_markdown(p: Posted) -> str:
    """The markdown of an interactive message (card JSON 2.0, or 1.0's `elements`)."""
    elements = (p.content.get("body") or {}).get("elements") or p.content.get("elements") or []
    return "\n".join(
        str(e.get("content") or "")
        for e in elements
        if isinstance(e, dict) and e.get("tag") == "markdown"
    )


def card_images(p: Posted) -> list[str]:
    """The img_keys of a card's `img` elements."""
    elements = (p.content.get("body") or {}).get("elements") or p.content.get("elements") or []
    return [str(e["img_key"]) for e in elements if isinstance(e, dict) and e.get("tag") == "img"]


def read_markdown(text: str) -> tuple[str, set[str], list[str]]:
    """(visible text, styles shown, open_ids mentioned) of card markdown, the way Feishu's
    clients show it: syntax applied, then HTML entities shown as their characters."""
    styles: set[str] = set()
    mentions = [m.group(1) for m in _AT.finditer(text)]
    if "<at " in _AT.sub("", text):
        styles.add("raw-at")  # an unescaped mention tag the bot did not mean to write
    text = _AT.sub("", text)
    held: list[str] = []

    def hold(value: str) -> str:
        held.append(value)
        return f"\x00{len(held) - 1}\x00"

    def code(m: re.Match[str]) -> str:
        styles.add("code")
        return hold(m.group(1) if m.group(1) is not None else m.group(2))

    text = _CODE.sub(code, text)

    def link(m: re.Match[str]) -> str:
        styles.add("link")
        return hold(m.group(1))

    text = _LINK.sub(link, text)
    for pattern, style in ((_BOLD, "bold"), (_STRIKE, "strike"), (_ITALIC, "italic")):
        text, n = pattern.subn(r"\1", text)
        if n:
            styles.add(style)
    if re.search(r"[*_~`\[\]]|<[A-Za-z/]", text):
        styles.add("raw-syntax")  # a syntax character the renderer left unescaped
    for i, value in enumerate(held):
        text = text.replace(f"\x00{i}\x00", value)
    return html.unescape(text), styles, mentions
