"""The HTTP channel: a JSON API for any program to talk to the bot, on aiohttp.

    POST /v1/messages          {"chat_id", "sender_id", "sender_name"?, "text", "is_group"?,
                                "at_bot"?, "images"?, "audio"?, "sender_roles"?}
                               -> 200 {"replies": [{"text", "at", "images"?, "audio"?}]}
    POST /v1/messages/stream   same body -> Server-Sent Events (text deltas, tool calls, replies)
    GET  /v1/events            Server-Sent Events: every message the bot sends, to any chat,
                               each with `id: <event id>`, in id order (a missing id is
                               waited for up to `storage.outbox.gap_wait`); reconnect with
                               `Last-Event-ID` (or `?since=ID`) to get every event missed
    GET  /v1/history           ?chat_id=&limit=&before= -> {"chat_id", "messages": [{"id",
                               "role", "text", "sender_id", "sender_name", "time",
                               "message_id"}]}, oldest first (history.py)
    GET  /v1/messages/{id}/fate what became of a stored message (its history id): {"fate",
                               "detail", "told", "since", ...} (fate.py; issue 40)
    GET  /                     the web chat page, labels in `bot.language` (?lang=en|zh)

Beside them on the same port, not this channel's: `/healthz` and `/metrics` (the runtime's,
chatfn/runtime/ops_web.py), `/mcp` (chatfn/channels/mcp/web.py) and the admin console
(admin/), each mounted by its owner on the bot's web server (chatfn/runtime/web_parts.py); this
channel gives that server's main listener its address.

When `channels.http.token` is set, every /v1 route (and /metrics and /mcp, whose owners check
the same token) needs `Authorization: Bearer <token>`.
When `channels.http.webhook_url` is set, every message the bot sends is also POSTed there with
an `X-Chatfn-Event-Id` header, signed with `channels.http.webhook_secret` (signature.py; the
token is never sent), retried with backoff on connection errors and 5xx (a 4xx is logged, not
retried); the webhook's position survives a restart.
A message to an HTTP chat with no request waiting for it (a reminder) stays in the outbox until
a /v1/events subscriber or the webhook took it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from aiohttp import ClientSession, ClientTimeout, web
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chatfn.channels.base import Channel
from chatfn.channels.http.fate import get_fate
from chatfn.channels.http.history import get_history
from chatfn.channels.http.openapi import PATH as OPENAPI_PATH
from chatfn.channels.http.openapi import handler as openapi_handler
from chatfn.channels.http.settings import HttpSettings
from chatfn.channels.http.signature import signed_headers
from chatfn.channels.probes import warn_open
from chatfn.common import bearer
from chatfn.common.i18n import LANGUAGES, catalogue
from chatfn.common.messages import (
    MAX_TEXT_CHARS,
    IncomingMessage,
    NotDelivered,
    OutgoingMessage,
    StreamEvent,
    clean_text,
    surrogate_at,
)
from chatfn.runtime.channel_host import ApiHost, ChannelHost, api_of, section_of
from chatfn.runtime.event_stream import EventQueue, EventReader

STATIC_DIR = Path(__file__).resolve().parent / "static"
# The web page runs only script files of this origin (its own static/js/ and the vendored
# marked and DOMPurify): a reply that got past the sanitizer as HTML still could not run code.
PAGE_CSP = "script-src 'self'; object-src 'none'; base-uri 'none'"


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    chat_id: str = Field(min_length=1, max_length=128)
    sender_id: str = Field(min_length=1, max_length=128)
    sender_name: str | None = Field(default=None, max_length=128)
    # May be empty when images are sent (a pasted picture alone is a message).
    text: str = Field(default="", max_length=MAX_TEXT_CHARS)
    is_group: bool = False
    at_bot: bool = False
    # Optional images: "https://..." URLs or "data:image/png;base64,..." URIs (at most 4).
    images: list[str] = Field(default_factory=list, max_length=4)
    # Optional voice: "https://..." URLs or "data:audio/ogg;base64,..." URIs (at most 1),
    # transcribed by `voice.stt` into the message's text (function_calls/voice.py).
    audio: list[str] = Field(default_factory=list, max_length=1)
    chat_name: str | None = Field(default=None, max_length=128)
    # The sender's roles in the group as the bridged platform reports them
    # (`bot.trust_group_admins`); the token holder may speak as anyone already.
    sender_roles: list[Literal["owner", "admin", "member"]] = Field(
        default_factory=list, max_length=3
    )

    @field_validator("chat_id", "sender_id", mode="before")
    @classmethod
    def _valid_id(cls, v: object) -> object:
        """An id with a lone surrogate is refused: replaced, two ids would become one chat."""
        at = surrogate_at(v) if isinstance(v, str) else None
        if at is not None:
            raise ValueError(f"not valid Unicode (a lone surrogate at position {at})")
        return v

    @field_validator("sender_name", "text", "chat_name", mode="before")
    @classmethod
    def _valid_unicode(cls, v: object) -> object:
        return clean_text(v) if isinstance(v, str) else v

    @field_validator("audio")
    @classmethod
    def _audio_refs(cls, v: list[str]) -> list[str]:
        for ref in v:
            if not ref.startswith(("https://", "http://", "data:audio/", "data:video/ogg")):
                raise ValueError("an https:// URL or a data:audio/...;base64, URI")
        return v


def _out_json(out: OutgoingMessage) -> dict[str, Any]:
    body: dict[str, Any] = {"text": out.text, "at": out.at}
    if out.images:  # a function's images: URLs or data URIs
        body["images"] = out.images
    if out.audio:  # the reply spoken (voice.tts): data URIs or URLs
        body["audio"] = out.audio
    return body


def _event_json(out: OutgoingMessage) -> dict[str, Any]:
    """An event's body; its id travels as SSE `id:` and the webhook's X-Chatfn-Event-Id."""
    return {"chat_id": out.chat_id, **_out_json(out)}


# Event ids are outbox row ids: 64-bit signed integers in every database the bot runs on.
MAX_EVENT_ID = 2**63 - 1


def _event_id(raw: str) -> int | None:
    """The event id a client gave (`Last-Event-ID`, `?since=`), or None when it is not one: not
    an integer, negative, or beyond what a row id can be (a database compares it as a 64-bit
    number, and a larger one overflows mid-stream instead of being refused up front)."""
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if value <= MAX_EVENT_ID else None


def _bad(error: str, status: int = 400) -> web.Response:
    return web.json_response({"error": error}, status=status)


def _parse_json(raw: bytes, charset: str | None) -> Any:
    """The JSON body, or a web.Response naming what is wrong with it (never a 500)."""
    charset = charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        return _bad(f"unknown charset {charset!r}")
    try:
        text = raw.decode(charset)
    except UnicodeDecodeError:
        return _bad(f"body is not valid {charset}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        return _bad(f"body must be a JSON object ({exc.msg})")
    except RecursionError:
        return _bad("body is nested too deep")
    except ValueError as exc:  # an integer of thousands of digits
        return _bad(f"body has a number out of range ({exc})")


class HttpChannel(Channel):
    platform = "http"
    streams = True

    def __init__(
        self,
        host: ChannelHost,
        settings: HttpSettings | None = None,
        *,
        api: ApiHost | None = None,
        bind: str | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(host)
        # What the API needs beyond a channel's host (the outbox's events, history, metrics,
        # the web server): from the factory, or the runtime's for `host`.
        self.api = api = api if api is not None else api_of(host)
        self.cfg = cfg = settings or section_of(host.settings, "http", HttpSettings)
        self.bind = bind or cfg.host
        self.port = cfg.port if port is None else port
        self.token = cfg.token
        self.webhook_url = cfg.webhook_url
        secret = cfg.webhook_secret
        self.webhook_secret = secret.get_secret_value() if secret is not None else None
        # The bot's web server (chatfn/runtime/web.py): this channel gives its main listener
        # the address and mounts the API there, beside the platforms' webhooks and the bot's
        # own parts (/healthz, /metrics, /mcp, the admin console: chatfn/runtime/web_parts.py),
        # which mount there when the server starts.
        self.web = api.web
        listener = self.web.main
        listener.listen(self.bind, self.port)
        self.app = app = listener.app
        app.middlewares.append(self._auth)
        app.router.add_post("/v1/messages", self.post_message)
        app.router.add_post("/v1/messages/stream", self.post_message_stream)
        app.router.add_get("/v1/events", self.get_events)
        app.router.add_get("/v1/history", self.get_history)
        app.router.add_get("/v1/messages/{id}/fate", self.get_fate)
        # The API as OpenAPI 3.1 (openapi.py), served without the token: it holds no data.
        app.router.add_get(OPENAPI_PATH, openapi_handler(MessageIn.model_json_schema()))
        if (STATIC_DIR / "index.html").exists():
            app.router.add_get("/", self.index)
            # The page's Markdown renderer and sanitizer (static/vendor/README.md): no CDN.
            app.router.add_static("/vendor/", STATIC_DIR / "vendor")
            app.router.add_static("/js/", STATIC_DIR / "js")
        self._webhook_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._stopped = False
        self._sse_clients = 0
        self._written: OrderedDict[int, None] = OrderedDict()  # event ids an SSE client took
        self._sse_tasks: set[asyncio.Task[Any]] = set()
        self._owns_web = False
        self.bound_port: int | None = None

    # -- auth ------------------------------------------------------------------------------
    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """The token on every /v1 route but the OpenAPI description (a POST while the bot
        stops was refused already: the runtime's gate, chatfn/runtime/ops_web.py)."""
        guarded = request.path.startswith("/v1/") and request.path != OPENAPI_PATH
        if guarded and not bearer.admitted(request, self.token):
            return bearer.refusal()
        return await handler(request)

    # -- routes ----------------------------------------------------------------------------
    async def get_history(self, request: web.Request) -> web.Response:
        return await get_history(self.api, self.platform, request)

    async def get_fate(self, request: web.Request) -> web.Response:
        return await get_fate(self.api, request)

    async def index(self, request: web.Request) -> web.Response:
        """The web chat page with its labels in the bot's language (`?lang=zh|en` chooses
        another), rendered in so the page shows no English before a script could fetch them."""
        language = request.query.get("lang", "")
        if language not in LANGUAGES:
            language = self.api.language_of(self.platform, "")
        labels = json.dumps(catalogue(language, "web."), ensure_ascii=False).replace("</", "<\\/")
        page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
        page = page.replace('<html lang="en">', f'<html lang="{language}">', 1)
        page = page.replace("/*LABELS*/{}", labels, 1)
        return web.Response(
            text=page,
            content_type="text/html",
            charset="utf-8",
            headers={"Content-Security-Policy": PAGE_CSP},
        )

    async def _read(self, request: web.Request) -> IncomingMessage | web.Response:
        body = _parse_json(await request.read(), request.charset)
        if isinstance(body, web.Response):
            return body
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
        if not data.text.strip() and not data.images and not data.audio:
            return web.json_response(
                {
                    "error": "text: it is empty or only whitespace; give a text, images or audio",
                    "field": "text",
                },
                status=400,
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
            audio=data.audio,
            sender_roles=list(data.sender_roles) if data.is_group else [],
        )

    async def post_message(self, request: web.Request) -> web.Response:
        msg = await self._read(request)
        if isinstance(msg, web.Response):
            return msg
        # A client that goes away does not cancel the turn: its replies wait in the outbox.
        sent = await self.host.handle(msg, self._discard, detached=True)
        return web.json_response({"replies": [_out_json(o) for o in sent]})

    async def post_message_stream(self, request: web.Request) -> web.StreamResponse:
        msg = await self._read(request)
        if isinstance(msg, web.Response):
            return msg
        resp = await self._sse_response(request)

        async def on_stream(event: StreamEvent) -> None:
            data: dict[str, Any] = {"text": event.text}
            if event.type in ("tool_call_start", "tool_call_end") and event.tool_call:
                call = event.tool_call
                data = {"id": call.id, "name": call.name}
                if event.type == "tool_call_end":
                    data["arguments"] = call.arguments
            elif event.type not in ("text", "thinking"):
                return
            # A client gone before aiohttp noticed: the turn goes on (its replies wait).
            with contextlib.suppress(ConnectionError):
                await self._sse(resp, event.type, data)

        async def on_reply(out: OutgoingMessage) -> None:
            try:
                await self._sse(resp, "reply", _out_json(out))
            except ConnectionError as exc:  # kept in the outbox for the client's next visit
                raise NotDelivered(f"the client went away ({exc})") from None

        # The turn is not the handler's: aiohttp cancels the handler when the client goes
        # away (a page reloaded, a tab closed), and the reply is finished and stored all the
        # same, then delivered through the outbox (/v1/events) instead of this response.
        sent = await self.host.handle(msg, on_reply, on_stream=on_stream, detached=True)
        await self._sse(resp, "done", {"replies": [_out_json(o) for o in sent]})
        await resp.write_eof()
        return resp

    async def get_events(self, request: web.Request) -> web.StreamResponse:
        """Every message the bot sends, as SSE with `id:` = event id, in id order. With
        `Last-Event-ID` (or `?since=ID`): first every kept event after that id, then the live
        stream; without: first the messages waiting for a subscriber, then every event after
        the last one committed when the client connected. A missing id holds the events after
        it back for up to `storage.outbox.gap_wait` seconds, as for the webhook
        (runtime.outbox.EventReader): a client that saw an id has seen every event before it
        that was committed in time, so `Last-Event-ID` never skips one."""
        since = request.headers.get("Last-Event-ID") or request.query.get("since")
        after: int | None = None
        if since is not None:
            after = _event_id(since)
            if after is None:
                return _bad(
                    "Last-Event-ID / since must be an event id: an integer from 0 to "
                    f"{MAX_EVENT_ID}"
                )
        resp = await self._sse_response(request)
        queue = self.api.subscribe()  # before the replay: nothing falls between the two
        self._sse_clients += 1
        task = asyncio.current_task()
        if task is not None:
            self._sse_tasks.add(task)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await resp.write(b": connected\n\n")
            outbox = self.api.outbox
            reader = outbox.reader(after if after is not None else await outbox.last_id())
            # Without an id: events up to the start are this client's only when waiting for a
            # subscriber (sent first, or passed on by the outbox drain as it connects).
            early: set[int] | None = None
            if after is None:
                early = set()
                # Each waiting message goes to one client: what another took is not taken.
                taken = await outbox.take_waiting(self.platform)
                try:
                    for out in taken:
                        await self._event(resp, out)
                        reader.skip(out)  # committed after `last_id` was read: not twice
                        early.add(out.event_id or 0)
                        await outbox.finish(out, "delivered")
                finally:  # what this client did not get waits for the next one
                    outbox.give_back(o for o in taken if (o.event_id or 0) not in early)
            # In a cluster, events of the other gateways reach this one only through the table.
            shared = self.host.settings.broker.url is not None
            await self._events_live(resp, reader, queue, stop, shared, early, outbox.hand_over)
            await self._sse(resp, "closing", {"reason": "the bot is shutting down"})
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            stop.cancel()
            self._sse_clients -= 1
            self._sse_tasks.discard(task)
            self.api.unsubscribe(queue)
            logger.debug("/v1/events stream ended ({} open)", self._sse_clients)
        return resp

    async def _events_live(
        self,
        resp: web.StreamResponse,
        reader: EventReader,
        queue: EventQueue,
        stop: asyncio.Future[Any],
        shared: bool,
        early: set[int] | None,
        hand_over: Callable[[int], bool],
    ) -> None:
        """The events after `reader.last`, then each as it is published, until the bot stops.
        A published event that is the next id goes out at once; any other sends the reader to
        the table (a missing id, or events it did not see published). `early` (a client that
        gave no id): the ids up to the start written already; one published from there (the
        outbox drain passing a waiting message on) goes out once, and only to the one client
        the outbox hands it over to (`hand_over`), not to every client without an id."""
        start = reader.last
        look = True  # read the table first: the replay, or what came since `last_id`
        idle = 0.0
        while not self._stopping.is_set():
            if look:
                for out in await reader.read():
                    await self._written_event(resp, out, reader)
                    idle = 0.0
            wait = reader.poll if reader.held or shared else 15.0
            done = await self._next(queue, stop, wait)
            get = next((f for f in done if f is not stop), None)
            if get is None:
                if stop in done:
                    return
                look = reader.held or shared
                idle += wait
                if idle >= 15.0:
                    await resp.write(b": keep-alive\n\n")
                    idle = 0.0
                continue
            look, idle = False, 0.0
            events = [get.result()]
            while not queue.empty():
                events.append(queue.get_nowait())
            if queue.dropped:  # the reader fell 1000 behind: what it missed is in the table
                queue.dropped.clear()
                look = True
            for out in events:
                eid = out.event_id
                if eid is None:  # not stored (the database failed): as it comes
                    await self._event(resp, out)
                elif eid == reader.last + 1 and not reader.held:
                    await self._written_event(resp, out, reader)
                elif eid > reader.last:
                    look = True
                elif early is not None and eid <= start and eid not in early and hand_over(eid):
                    early.add(eid)
                    await self._event(resp, out)

    @staticmethod
    async def _next(
        queue: EventQueue, stop: asyncio.Future[Any], wait: float
    ) -> set[asyncio.Future[Any]]:
        """The next published event (a done `queue.get()` future) and/or `stop`, within `wait`
        seconds. The `get` task never outlives this call: a client that goes away cancels the
        handler here, and a `get` left pending would be destroyed pending later (logged as
        "Task was destroyed but it is pending!" on every page reload)."""
        get = asyncio.ensure_future(queue.get())
        try:
            done, _ = await asyncio.wait({get, stop}, timeout=wait, return_when="FIRST_COMPLETED")
        finally:
            if not get.done():
                get.cancel()
        return done

    async def _written_event(
        self, resp: web.StreamResponse, out: OutgoingMessage, reader: EventReader
    ) -> None:
        if not reader.skipped(out):
            await self._event(resp, out)
        reader.advance(out)

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
    async def _sse(
        resp: web.StreamResponse, event: str, data: dict[str, Any], event_id: int | None = None
    ) -> None:
        payload = json.dumps(data, ensure_ascii=False)
        head = f"id: {event_id}\n" if event_id is not None else ""
        await resp.write(f"{head}event: {event}\ndata: {payload}\n\n".encode())

    async def _event(self, resp: web.StreamResponse, out: OutgoingMessage) -> None:
        await self._sse(resp, "message", _event_json(out), out.event_id)
        if out.event_id is not None:  # a client took it: `send` reports it delivered
            self._written[out.event_id] = None
            if len(self._written) > 10000:
                self._written.popitem(last=False)

    @staticmethod
    async def _discard(_out: OutgoingMessage) -> None:
        return None

    # -- outgoing --------------------------------------------------------------------------
    async def send(self, message: OutgoingMessage) -> None:
        """A message with no request waiting for it (a reminder) reaches HTTP clients through
        /v1/events (the bot published it to every subscriber) and the webhook (its own loop).
        With neither, it stays in the outbox."""
        if message.event_id is not None and message.event_id in self._written:
            return
        if self._sse_clients:
            # Published to the subscribers already when it comes from `Bot.deliver`; not when
            # the outbox drain passes it on (after a restart, or a gateway's row). Each
            # client writes an event id once, so publishing it again costs nothing.
            if message.event_id is not None:
                self.api.publish(message)
            return
        raise NotDelivered(
            "no /v1/events subscriber" + (" (the webhook will take it)" if self.webhook_url else "")
        )

    async def _webhook_loop(self) -> None:
        """POST every event, in id order, from where the webhook got to (kept in the database,
        so a restart neither repeats nor skips events). A missing id is waited for a moment
        (`storage.outbox.gap_wait`, runtime.outbox.EventReader), as on /v1/events."""
        wake = self.api.subscribe(wake_only=True)
        reader = self.api.outbox.reader(await self.api.outbox.cursor("webhook"))
        async with ClientSession(timeout=ClientTimeout(total=10)) as session:
            try:
                while not self._stopping.is_set():
                    events = await reader.read()
                    if not events:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(reader.poll):
                                await wake.get()
                        while not wake.empty():
                            wake.get_nowait()
                        continue
                    for out in events:
                        if not await self._post(session, out):
                            return  # stopping: resume from this event next time
                        reader.advance(out)
                        await self.api.outbox.set_cursor("webhook", reader.last)
            finally:
                self.api.unsubscribe(wake)

    async def _post(self, session: ClientSession, out: OutgoingMessage) -> bool:
        """Deliver one event to the webhook: retried on connection errors and 5xx as the
        delivery policy says (chatfn/runtime/delivery_policy.py: `pause(n)`, 0.5 s doubling
        to 60 s) until it is taken or has waited `storage.outbox.max_wait`; a 4xx is logged
        and not retried. False when the channel stops first. Each attempt is signed with
        `webhook_secret` (signature.py); the bot's token is never sent."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        policy, attempt = self.api.outbox.policy, 0
        body = json.dumps(_event_json(out), ensure_ascii=False).encode()
        while not self._stopping.is_set():
            hdrs = {
                "Content-Type": "application/json",
                "X-Chatfn-Event-Id": str(out.event_id),
                **signed_headers(self.webhook_secret, body),
            }
            try:
                async with session.post(self.webhook_url or "", data=body, headers=hdrs) as r:
                    status = r.status
                if status < 400:
                    if out.platform == self.platform:
                        await self.api.outbox.finish(out, "delivered")
                    return True
                if status < 500:
                    logger.error(
                        "webhook refused event {} (HTTP {}): not retried", out.event_id, status
                    )
                    return True
                why = f"HTTP {status}"
            except Exception as exc:  # connection refused, reset, timeout: retried
                why = str(exc) or type(exc).__name__
            waited = loop.time() - started
            if policy.expired(waited):
                self.api.outbox.count_expired(out, f"webhook failing for {waited:.0f} s ({why})")
                return True
            delay, attempt = policy.pause(attempt), attempt + 1
            logger.warning(
                "webhook POST of event {} failed ({}): retry in {:.1f} s", out.event_id, why, delay
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
        return False

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        # The runtime starts the web server once every channel mounted its routes (`chatfn
        # run`); a program running this channel alone has it started here, and stopped by
        # `stop`.
        self._owns_web = not self.web.running
        await self.web.start()
        self.bound_port = self.web.main.bound_port
        if self.webhook_url:
            if not self.webhook_secret:
                logger.warning(
                    "channels.http.webhook_secret is not set: webhook POSTs to {} are not "
                    "signed, so the receiver cannot tell them from anyone else's",
                    self.webhook_url,
                )
            self._webhook_task = asyncio.create_task(self._webhook_loop())
        logger.info("HTTP channel listening on http://{}:{}", self.bind, self.bound_port)
        warn_open("http", "token", self.bind, self.token, "any sender, admins included")

    async def run(self) -> None:
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Tell /v1/events clients the bot is closing, stop the webhook; safe to call twice (a
        signal and the end of `run`). The web server (the listener, the requests in flight,
        /mcp and the admin console) is the runtime's to stop, after the channels, unless this
        channel started it."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        if self._sse_tasks:  # they write their `closing` event and end
            await asyncio.wait(set(self._sse_tasks), timeout=2)
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
        if self._owns_web:
            await self.web.stop()
