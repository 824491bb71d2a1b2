"""The HTTP channel: a JSON API for any program to talk to the bot, on aiohttp.

    POST /v1/messages          {"chat_id", "sender_id", "sender_name"?, "text", "is_group"?,
                                "at_bot"?, "images"?} -> 200 {"replies": [{"text", "at"}]}
    POST /v1/messages/stream   same body -> Server-Sent Events (text deltas, tool calls, replies)
    GET  /v1/events            Server-Sent Events: every message the bot sends, to any chat
    GET  /metrics              Prometheus text format (messages, model requests, tokens,
                               latency, tool calls, limit refusals)
    GET  /                     the web chat page, labels in `bot.language` (?lang=en|zh)
    GET  /healthz              liveness, no token needed
    POST /mcp                  MCP streamable HTTP (when `channels.http.mcp` is true)

When `channels.http.token` is set, every /v1 route, /metrics and /mcp need
`Authorization: Bearer <token>`.
When `channels.http.webhook_url` is set, every message the bot sends is also POSTed there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from channels.base import Channel
from common.i18n import LANGUAGES, catalogue, language_of
from common.messages import IncomingMessage, OutgoingMessage, StreamEvent
from common.metrics import CONTENT_TYPE_LATEST
from runtime.bot import Bot

STATIC_DIR = Path(__file__).resolve().parent / "static"


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    chat_id: str = Field(min_length=1, max_length=128)
    sender_id: str = Field(min_length=1, max_length=128)
    sender_name: str | None = Field(default=None, max_length=128)
    # May be empty when images are sent (a pasted picture alone is a message).
    text: str = Field(default="", max_length=20000)
    is_group: bool = False
    at_bot: bool = False
    # Optional images: "https://..." URLs or "data:image/png;base64,..." URIs (at most 4).
    images: list[str] = Field(default_factory=list, max_length=4)
    chat_name: str | None = Field(default=None, max_length=128)


def _out_json(out: OutgoingMessage) -> dict[str, Any]:
    return {"text": out.text, "at": out.at}


def _event_json(out: OutgoingMessage) -> dict[str, Any]:
    return {"chat_id": out.chat_id, "text": out.text, "at": out.at}


class HttpChannel(Channel):
    platform = "http"
    streams = True

    def __init__(self, bot: Bot, *, host: str | None = None, port: int | None = None) -> None:
        super().__init__(bot)
        cfg = bot.settings.channels.http
        self.host = host or cfg.host
        self.port = cfg.port if port is None else port
        self.token = cfg.token
        self.webhook_url = cfg.webhook_url
        self.app = web.Application(middlewares=[self._auth])
        self.app.router.add_post("/v1/messages", self.post_message)
        self.app.router.add_post("/v1/messages/stream", self.post_message_stream)
        self.app.router.add_get("/v1/events", self.get_events)
        self.app.router.add_get("/metrics", self.metrics)
        self.app.router.add_get("/healthz", self.healthz)
        if (STATIC_DIR / "index.html").exists():
            self.app.router.add_get("/", self.index)
        self.mcp: Any = None
        if cfg.mcp:  # the MCP SDK is optional: imported only when /mcp is on
            from channels.mcp import McpHttpEndpoint

            self.mcp = McpHttpEndpoint(bot)
            self.app.router.add_route("*", "/mcp", self.mcp.handle)
        self._runner: web.AppRunner | None = None
        self._webhook_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.bound_port: int | None = None

    # -- auth ------------------------------------------------------------------------------
    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.token and (request.path.startswith("/v1/") or request.path in ("/metrics", "/mcp")):
            header = request.headers.get("Authorization", "")
            given = header[7:] if header.startswith("Bearer ") else request.query.get("token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return web.json_response(
                    {"error": "missing or wrong token: send 'Authorization: Bearer <token>'"},
                    status=401,
                )
        return await handler(request)

    # -- routes ----------------------------------------------------------------------------
    async def healthz(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "ok", "model": self.bot.model.name if self.bot.model else None}
        )

    async def metrics(self, _request: web.Request) -> web.Response:
        body = self.bot.metrics.render()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def index(self, request: web.Request) -> web.Response:
        """The web chat page with its labels in the bot's language (`?lang=zh|en` chooses
        another), rendered in so the page shows no English before a script could fetch them."""
        language = request.query.get("lang", "")
        if language not in LANGUAGES:
            language = language_of(self.bot.settings, self.platform, "")
        labels = json.dumps(catalogue(language, "web."), ensure_ascii=False).replace("</", "<\\/")
        page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
        page = page.replace('<html lang="en">', f'<html lang="{language}">', 1)
        page = page.replace("/*LABELS*/{}", labels, 1)
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def _read(self, request: web.Request) -> IncomingMessage | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "body must be a JSON object"}, status=400)
        try:
            data = MessageIn.model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "body"
            return web.json_response(
                {"error": f"{field}: {err['msg']}", "field": field}, status=400
            )
        if not data.text.strip() and not data.images:
            return web.json_response(
                {"error": "text: give a text, or images", "field": "text"}, status=400
            )
        return IncomingMessage(
            platform=self.platform,
            chat_id=data.chat_id,
            sender_id=data.sender_id,
            sender_name=data.sender_name or data.sender_id,
            text=data.text,
            is_group=data.is_group,
            is_at_bot=data.at_bot,
            chat_name=data.chat_name or "",
            message_id=uuid.uuid4().hex[:16],
            images=data.images,
        )

    async def post_message(self, request: web.Request) -> web.Response:
        msg = await self._read(request)
        if isinstance(msg, web.Response):
            return msg
        sent = await self.bot.handle(msg, self._discard)
        return web.json_response({"replies": [_out_json(o) for o in sent]})

    async def post_message_stream(self, request: web.Request) -> web.StreamResponse:
        msg = await self._read(request)
        if isinstance(msg, web.Response):
            return msg
        resp = await self._sse_response(request)

        async def on_stream(event: StreamEvent) -> None:
            if event.type in ("text", "thinking"):
                await self._sse(resp, event.type, {"text": event.text})
            elif event.type in ("tool_call_start", "tool_call_end") and event.tool_call:
                call = event.tool_call
                data: dict[str, Any] = {"id": call.id, "name": call.name}
                if event.type == "tool_call_end":
                    data["arguments"] = call.arguments
                await self._sse(resp, event.type, data)

        async def on_reply(out: OutgoingMessage) -> None:
            await self._sse(resp, "reply", _out_json(out))

        sent = await self.bot.handle(msg, on_reply, on_stream=on_stream)
        await self._sse(resp, "done", {"replies": [_out_json(o) for o in sent]})
        await resp.write_eof()
        return resp

    async def get_events(self, request: web.Request) -> web.StreamResponse:
        resp = await self._sse_response(request)
        queue = self.bot.subscribe()
        try:
            await resp.write(b": connected\n\n")
            while not self._stopping.is_set():
                try:
                    out = await asyncio.wait_for(queue.get(), timeout=15)
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
                    continue
                await self._sse(resp, "message", _event_json(out))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.bot.unsubscribe(queue)
        return resp

    # -- SSE helpers -----------------------------------------------------------------------
    @staticmethod
    async def _sse_response(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await resp.prepare(request)
        return resp

    @staticmethod
    async def _sse(resp: web.StreamResponse, event: str, data: dict[str, Any]) -> None:
        payload = json.dumps(data, ensure_ascii=False)
        await resp.write(f"event: {event}\ndata: {payload}\n\n".encode())

    @staticmethod
    async def _discard(_out: OutgoingMessage) -> None:
        return None

    # -- outgoing --------------------------------------------------------------------------
    async def send(self, message: OutgoingMessage) -> None:
        """Unsolicited messages reach HTTP clients through /v1/events and the webhook, both fed
        by the bot's event bus; nothing more to do here."""

    async def _webhook_loop(self) -> None:
        queue = self.bot.subscribe()
        timeout = ClientTimeout(total=10)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with ClientSession(timeout=timeout) as session:
            try:
                while True:
                    out = await queue.get()
                    try:
                        async with session.post(
                            self.webhook_url or "", json=_event_json(out), headers=headers
                        ) as r:
                            if r.status >= 400:
                                logger.warning(
                                    "webhook answered {} for a message to {}", r.status, out.chat_id
                                )
                    except Exception as exc:  # a down webhook must not stop the bot
                        logger.warning("webhook POST failed: {}", exc)
            finally:
                self.bot.unsubscribe(queue)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        if self.mcp is not None:
            await self.mcp.start()
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        if self.webhook_url:
            self._webhook_task = asyncio.create_task(self._webhook_loop())
        logger.info("HTTP channel listening on http://{}:{}", self.host, self.bound_port)
        if not self.token and self.host not in ("127.0.0.1", "localhost", "::1"):
            logger.warning(
                "channels.http.token is not set but the channel listens on {}: "
                "anyone who can reach it can speak as any sender, admins included",
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
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.mcp is not None:
            await self.mcp.stop()
