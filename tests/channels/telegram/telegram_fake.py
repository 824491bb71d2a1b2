"""A local Telegram Bot API server (aiohttp) for the Telegram channel's tests: the methods the
channel uses, with the request and response shapes of the official reference
(https://core.telegram.org/bots/api; see tests/fixtures/telegram/README.md), driven by the real
python-telegram-bot client through `channels.telegram.base_url`.

    async with FakeTelegram() as tg:
        settings = {"token": tg.token, "base_url": tg.base_url}
        await tg.message(tg.private(1001), "hello")          # a user writes
        [sent] = await tg.wait_sent(1001, 1)                 # what the bot sent there

Requests are `{base_url}/bot{token}/METHOD` (form, multipart or JSON bodies, as the Bot API
takes them); files are `{base_url}/file/bot{token}/PATH`. Updates reach the bot through
getUpdates (long polling with offsets that confirm) or, once setWebhook was called, by POSTs to
the webhook URL with the X-Telegram-Bot-Api-Secret-Token header. MarkdownV2 is parsed as
Telegram documents it (telegram_markup.py here): a message it cannot parse is refused
with 400 "Bad Request: can't parse entities", as Telegram does. Test hooks: `rate_limit_next`
(a 429 with `parameters.retry_after`), `fail_next` (any error), `drop()` (the server goes away
and comes back on the same port), `members` (getChatMember statuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.channels.fake_platform import FakePlatform
from tests.channels.telegram.telegram_markup import MarkupError, parse_markdown_v2

BOT_ID = 7000000001
BOT_USERNAME = "chatfn_test_bot"


@dataclass
class Sent:
    """One message the bot sent (sendMessage or sendPhoto), as the server took it."""

    method: str
    chat_id: int
    message_id: int
    text: str  # the plain text (markup parsed), or the photo's caption
    raw: str  # what the bot sent, before parsing
    parse_mode: str | None
    kinds: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    thread_id: int | None = None
    reply_to: int | None = None
    photo: bytes | str | None = None
    # An inline keyboard's buttons (reply_markup), as (text, callback_data).
    buttons: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mentions(self) -> list[str]:
        return [u.split("id=", 1)[1] for u in self.links if u.startswith("tg://user?id=")]


def _error(code: int, description: str, **parameters: Any) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


class FakeTelegram(FakePlatform):
    runner_kwargs = {"access_log": None, "shutdown_timeout": 0.1}
    wait_timeout = 30.0

    def __init__(self, token: str = "123456:TEST-token_abc") -> None:
        super().__init__()
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self.sent: list[Sent] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.files: dict[str, bytes] = {}
        self.members: dict[tuple[int, int], str] = {}  # (chat, user) -> status
        self._faults: dict[tuple[str, int | None], list[web.Response]] = {}
        self.webhook: dict[str, Any] | None = None
        self.webhook_posts: list[int] = []  # HTTP statuses the bot's webhook answered
        self.answered: list[str] = []  # the callback query ids answerCallbackQuery named
        self.me = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Chatfn Test",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    # -- lifecycle -----------------------------------------------------------------------------
    # (start, stop, drop: FakePlatform's; drop() cuts a long poll in flight, the next one
    # reconnects)
    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/bot{token}/{method}", self._method)
        router.add_get("/file/bot{token}/{path:.+}", self._file)

    @property
    def base_url(self) -> str:
        return self.base

    # -- test hooks ----------------------------------------------------------------------------
    def rate_limit_next(self, chat_id: int, retry_after: int, method: str = "sendMessage") -> None:
        self.fail_next(
            chat_id,
            _error(429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after),
            method,
        )

    def fail_next(
        self, chat_id: int | None, response: web.Response, method: str = "sendMessage"
    ) -> None:
        self._faults.setdefault((method, chat_id), []).append(response)

    async def wait_sent(self, chat_id: int, count: int, timeout: float = 30.0) -> list[Sent]:
        """At least `count` messages of the bot in `chat_id`, all of them, in order."""
        await self.wait_for(
            lambda: len([s for s in self.sent if s.chat_id == chat_id]) >= count, timeout
        )
        return [s for s in self.sent if s.chat_id == chat_id]

    # -- updates the users cause ---------------------------------------------------------------
    @staticmethod
    def private(user_id: int, first_name: str = "Ann") -> dict[str, Any]:
        return {"id": user_id, "type": "private", "first_name": first_name}

    @staticmethod
    def group(chat_id: int, title: str = "Test group", forum: bool = False) -> dict[str, Any]:
        chat: dict[str, Any] = {
            "id": chat_id,
            "type": "supergroup" if chat_id < -(10**12) or forum else "group",
            "title": title,
        }
        if forum:
            chat["is_forum"] = True
        return chat

    @staticmethod
    def user(user_id: int, first_name: str = "Ann", last_name: str | None = None) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        return user

    async def message(
        self,
        chat: dict[str, Any],
        text: str | None = None,
        *,
        sender: dict[str, Any] | None = None,
        entities: list[dict[str, Any]] | None = None,
        photo: bytes | None = None,
        reply_to: dict[str, Any] | None = None,
        thread_id: int | None = None,
        sender_chat: dict[str, Any] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A user's message as an Update (text, or a photo with `text` as its caption);
        returns the Message object."""
        sender = sender or self.user(chat["id"] if chat["type"] == "private" else 1001)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "from": sender,
            "chat": chat,
            "date": int(time.time()),
            **extra,
        }
        if sender_chat is not None:
            message["sender_chat"] = sender_chat
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if photo is not None:
            message["photo"] = [
                self.add_photo(photo, 90, 90, small=True),
                self.add_photo(photo, 800, 600),
            ]
            if text is not None:
                message["caption"] = text
                if entities:
                    message["caption_entities"] = entities
        elif text is not None:
            message["text"] = text
            if entities:
                message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        await self.push({"message": message})
        return message

    def add_photo(
        self, data: bytes, width: int, height: int, *, small: bool = False
    ) -> dict[str, Any]:
        """A PhotoSize whose file the server holds (a small size holds other bytes, so a test
        can tell which size the bot downloaded)."""
        n = len(self.files) + 1
        file_id = f"AgACAgIAAx-file-{n}"
        self.files[file_id] = b"small-size" if small else data
        return {
            "file_id": file_id,
            "file_unique_id": f"uniq{n}",
            "width": width,
            "height": height,
            "file_size": len(self.files[file_id]),
        }

    async def press(
        self, chat: dict[str, Any], sender: dict[str, Any], sent: Sent, data: str
    ) -> str:
        """A user presses the button with `data` under the bot's message `sent` (a
        callback_query update); returns the query's id (answerCallbackQuery names it)."""
        query_id = f"q{next(self._update_ids)}"
        message = {
            "message_id": sent.message_id,
            "from": self.me,
            "chat": chat,
            "date": int(time.time()),
            "text": sent.text,
        }
        await self.push(
            {
                "callback_query": {
                    "id": query_id,
                    "from": sender,
                    "chat_instance": "ci-1",
                    "data": data,
                    "message": message,
                }
            }
        )
        return query_id

    async def _api_answerCallbackQuery(
        self, params: dict[str, Any], chat_id: int | None
    ) -> web.Response:
        self.answered.append(str(params.get("callback_query_id")))
        return _ok(True)

    async def members_join(self, chat: dict[str, Any], *users: dict[str, Any]) -> None:
        await self.message(chat, None, sender=users[0], new_chat_members=list(users))

    async def push(self, update: dict[str, Any]) -> int:
        """Queue an update (getUpdates) or POST it to the webhook; returns its update_id."""
        update = {"update_id": next(self._update_ids), **update}
        if self.webhook is not None:
            status = await self._post_webhook(update)
            self.webhook_posts.append(status)
        else:
            self.updates.append(update)
        await self.notify()
        return update["update_id"]

    async def _post_webhook(self, update: dict[str, Any]) -> int:
        assert self.webhook is not None
        headers = {}
        if self.webhook.get("secret_token"):
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook["secret_token"]
        async with aiohttp.ClientSession() as session:
            for _ in range(50):  # Telegram retries a webhook that fails; so does the fake
                try:
                    async with session.post(self.webhook["url"], json=update, headers=headers) as r:
                        if r.status < 500:
                            return r.status
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.1)
        return 0

    # -- the Bot API ---------------------------------------------------------------------------
    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            return dict(await request.json())
        params: dict[str, Any] = {}
        form = await request.post() if request.can_read_body else request.query
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = value.file.read()
                continue
            try:  # the Bot API takes nested objects (reply_parameters, ...) as JSON strings
                params[key] = json.loads(value) if value[:1] in "[{" else value
            except json.JSONDecodeError:
                params[key] = value
        params.update({k: v for k, v in request.query.items() if k not in params})
        return params

    async def _method(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await self._params(request)
        self.calls.append((method, params))
        chat = params.get("chat_id")
        chat_id = int(chat) if chat is not None and str(chat).lstrip("-").isdigit() else None
        for key in ((method, chat_id), (method, None)):
            if self._faults.get(key):
                return self._faults[key].pop(0)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        return await handler(params, chat_id)

    async def _api_getMe(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        return _ok(self.me)

    async def _api_deleteWebhook(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        self.webhook = None
        return _ok(True)

    async def _api_setWebhook(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        self.webhook = {"url": params["url"], "secret_token": params.get("secret_token")}
        await self.notify()
        pending, self.updates = self.updates, []
        for update in pending:
            self.webhook_posts.append(await self._post_webhook(update))
        return _ok(True)

    async def _api_getUpdates(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        if self.webhook is not None:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        if offset:  # confirms every update before it (Bot API getUpdates)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: bool(self.updates))
        return _ok(self.updates[: int(params.get("limit") or 100)])

    async def _api_sendMessage(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        return await self._took("sendMessage", params, chat_id, str(params.get("text", "")))

    async def _api_sendPhoto(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        return await self._took("sendPhoto", params, chat_id, str(params.get("caption") or ""))

    async def _took(
        self, method: str, params: dict[str, Any], chat_id: int | None, raw: str
    ) -> web.Response:
        if chat_id is None:
            return _error(400, "Bad Request: chat not found")
        parse_mode = params.get("parse_mode")
        kinds: set[str] = set()
        links: list[str] = []
        text = raw
        if parse_mode == "MarkdownV2":
            try:
                text = parse_markdown_v2(raw, kinds, links)
            except MarkupError as exc:
                return _error(400, f"Bad Request: can't parse entities: {exc}")
        if method == "sendMessage" and not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > (4096 if method == "sendMessage" else 1024):
            return _error(400, "Bad Request: message is too long")
        reply = params.get("reply_parameters") or {}
        markup = params.get("reply_markup") or {}
        if isinstance(markup, str):
            markup = json.loads(markup)
        buttons = [
            (str(b["text"]), str(b.get("callback_data", "")))
            for row in markup.get("inline_keyboard", [])
            for b in row
        ]
        thread = params.get("message_thread_id")
        sent = Sent(
            method=method,
            chat_id=chat_id,
            message_id=next(self._message_ids),
            text=text,
            raw=raw,
            parse_mode=parse_mode,
            kinds=kinds,
            links=links,
            thread_id=int(thread) if thread is not None else None,
            reply_to=int(reply["message_id"]) if reply.get("message_id") else None,
            photo=params.get("photo"),
            buttons=buttons,
        )
        self.sent.append(sent)
        await self.notify()
        result: dict[str, Any] = {
            "message_id": sent.message_id,
            "from": self.me,
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "date": int(time.time()),
        }
        if method == "sendPhoto":
            result["photo"] = [self.add_photo(b"sent", 1, 1)]
            if text:
                result["caption"] = text
        else:
            result["text"] = text
        return _ok(result)

    async def _api_getFile(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            return _error(400, "Bad Request: invalid file_id")
        return _ok(
            {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id}",
                "file_size": len(self.files[file_id]),
                "file_path": f"photos/{file_id}.jpg",
            }
        )

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        file_id = request.match_info["path"].removeprefix("photos/").removesuffix(".jpg")
        if file_id not in self.files:
            return _error(404, "Not Found")
        return web.Response(body=self.files[file_id], content_type="image/jpeg")

    async def _api_getChatMember(self, params: dict[str, Any], chat_id: int | None) -> web.Response:
        user_id = int(params["user_id"])
        status = self.members.get((chat_id or 0, user_id), "member")
        member: dict[str, Any] = {"status": status, "user": self.user(user_id)}
        if status == "administrator":
            member.update(
                can_be_edited=False,
                is_anonymous=False,
                can_manage_chat=True,
                can_delete_messages=True,
                can_manage_video_chats=True,
                can_restrict_members=True,
                can_promote_members=False,
                can_change_info=True,
                can_invite_users=True,
                can_post_stories=False,
                can_edit_stories=False,
                can_delete_stories=False,
            )
        elif status == "creator":
            member["is_anonymous"] = False
        return _ok(member)
