"""`mode: websocket`: events over the open platform's long connection, held by lark-oapi's
`lark_oapi.ws.Client` (the official client of that protocol: an endpoint from
POST {domain}/callback/ws/endpoint with AppID/AppSecret, then protobuf `Frame`s over a
WebSocket: pings, and event frames each answered with a response frame).

Why it runs in a thread of its own (kit.loop_thread): the SDK's client is written around a
module-level event loop (`lark_oapi.ws.client.loop`, taken when the module is first imported)
and a `start()` that blocks that loop forever with no way to stop it. So the client runs on a
private loop (that module global is pointed at it: one Feishu long connection per process);
the link drives the first connection itself (`_connect`, in the kit's `sessions`: backoff, one
clear line for refused credentials) instead of `start()`, and stops it by closing it.
After a drop the SDK reconnects as the platform's endpoint tells it
(ReconnectInterval / ReconnectNonce / ReconnectCount); should that give up, the link starts
over with its own backoff. Events are handed to the channel's loop with
`run_coroutine_threadsafe`, so the SDK's thread never touches the bot.

An event frame is answered only once the channel says its message is stored (`on_event`'s
result): the SDK handles each frame in a task of its own, calls the handler, then writes the
response frame; the handler leaves the channel's answer in that task (the kit's `Answers`),
and the link's `_write_message` waits for it (without blocking the SDK's loop) and answers a
message not stored in time with code 500, which the platform pushes again.

A card's button click (`card.action.trigger`, a callback the platform sends over the same
connection as an event frame) wants an answer, not only "handled": the toast shown to the
clicker and the card to show instead (within 3 s). The channel's answer to it is that object,
which `_write_message` writes as the response frame's `data` (base64 of its JSON), where the
SDK would put a callback handler's return value. The platform has been seen to send that
callback in a frame of type "card" as well as "event", and lark-oapi drops "card" frames
unanswered (oapi-sdk-python issue 126: the clicker sees error 200340), so `_handle_data_frame`
hands such a frame to the dispatcher as an event, and its response frame keeps type "card".
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from chatfn.channels import kit
from chatfn.channels.feishu.api import ERRORS
from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.kit.loop_thread import Answers, LoopThread, Up

__all__ = ["CARD_ACTION", "EVENTS", "WsLink"]

#: The events the channel handles (registered with the SDK's dispatcher).
EVENTS = ("im.message.receive_v1", "im.chat.member.user.added_v1", "im.chat.member.bot.added_v1")
#: The callback of a click on a card's button (registered as the SDK's card action handler).
CARD_ACTION = "card.action.trigger"

# True: stored, answer "handled"; a dict: a callback's answer (module docstring). A coroutine:
# it runs on the bot's loop from the SDK's thread.
Answer = bool | dict[str, Any]
OnEvent = Callable[[dict[str, Any]], Coroutine[Any, Any, Answer]]


# Whether the frame being handled (in the SDK's task for it) came as type "card".
_CARD_FRAME: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "feishu_card_frame", default=False
)


def _point(loop: asyncio.AbstractEventLoop) -> None:
    """The SDK's tasks are created on a module global (module docstring): this thread's loop."""
    import lark_oapi.ws.client as ws_client

    ws_client.loop = loop


def _set_type(frame: Any, old: str, new: str) -> bool:
    """Rename the frame's `type` header from `old` to `new`; whether it was `old`."""
    for header in frame.headers:
        if header.key == "type" and header.value == old:
            header.value = new
            return True
    return False


def answered(data: bytes, answer: dict[str, Any] | None) -> bytes:
    """The response frame `data` saying the event failed (`answer` None: code 500, the
    platform pushes it again) or carrying a callback's answer (base64 of its JSON, as the
    SDK writes a callback handler's result; of type "card" when the frame came so)."""
    from lark_oapi.ws.pb.pbbp2_pb2 import Frame

    frame = Frame()
    frame.ParseFromString(data)
    if answer is None:
        frame.payload = json.dumps({"code": 500}).encode()
    else:
        body = base64.b64encode(json.dumps(answer, ensure_ascii=False).encode()).decode()
        frame.payload = json.dumps({"code": 200, "data": body}).encode()
        if _CARD_FRAME.get():
            _set_type(frame, "event", "card")  # answered as the frame came
    return bytes(frame.SerializeToString())


def _rewritten(data: bytes, stored: Answer) -> bytes:
    """The response frame as the channel's answer makes it: as the SDK wrote it when stored
    (True), else `answered` (an answer {} is an answer)."""
    if isinstance(stored, dict) or not stored:
        return answered(data, stored if isinstance(stored, dict) else None)
    return data


def card_payload(data: Any) -> dict[str, Any]:
    """The SDK's P2CardActionTrigger back as the callback's JSON shape (schema 2.0)."""
    from lark_oapi.core.json import JSON

    payload = json.loads(JSON.marshal(data))
    return payload if isinstance(payload, dict) else {}


def as_payload(data: Any) -> dict[str, Any]:
    """The SDK's CustomizedEvent back as the event's JSON shape (schema 2.0)."""
    header = getattr(data, "header", None)
    return {
        "schema": getattr(data, "schema", None) or "2.0",
        "header": {
            name: getattr(header, name, None)
            for name in ("event_id", "event_type", "create_time", "token", "app_id", "tenant_key")
        },
        "event": getattr(data, "event", None) or {},
    }


class WsLink:
    """The long connection (module docstring). `on_event` is called on the loop that called
    `start()`, and `channel` told there how the link is."""

    def __init__(self, settings: FeishuSettings, on_event: OnEvent, channel: kit.Lifecycle) -> None:
        self.cfg = settings
        self._on_event = on_event
        self.thread = LoopThread(
            "feishu-ws", "Feishu long connection", self._session, _point, channel, _refused
        )
        self._answers = Answers[Answer](self.thread, "feishu_answer", False)
        self.client: Any = None

    def start(self) -> None:
        self.thread.start()

    async def stop(self) -> None:
        await self.thread.stop()

    # -- on the link's thread ------------------------------------------------------------------
    def _event(self, data: Any) -> None:
        """The SDK's handler: hand the event to the channel; its answer is written by the
        client's `_write_message` (a home loop gone answers 500 through the SDK's own except)."""
        self._answers.hand(self._on_event(as_payload(data)))

    def _card(self, data: Any) -> None:
        """The SDK's card action handler: like `_event`; the channel's answer (the toast and
        card for the clicker) is written by `_write_message`, so the SDK's is None."""
        self._answers.hand(self._on_event(card_payload(data)))

    @staticmethod
    def _cards_too(handle: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        """The client's `_handle_data_frame`, taking a "card" frame as an event (module
        docstring) instead of dropping it."""

        async def handle_data_frame(frame: Any) -> None:
            if _set_type(frame, "card", "event"):
                _CARD_FRAME.set(True)
            await handle(frame)

        return handle_data_frame

    async def _session(self, thread: LoopThread) -> None:
        import lark_oapi as lark
        from lark_oapi.ws.exception import ClientException

        builder = lark.EventDispatcherHandler.builder("", "")
        for kind in EVENTS:
            builder = builder.register_p2_customized_event(kind, self._event)
        self._handler = builder.register_p2_card_action_trigger(self._card).build()
        await thread.sessions(self._connect, (ClientException,))

    async def _connect(self, lost: asyncio.Event) -> Up:
        """One connection: a new SDK client, connected (`start()` would block this loop for
        good), its give-up reported and `lost` set, its writes waiting for the answers."""
        import lark_oapi as lark
        import lark_oapi.ws.client as ws_client
        from lark_oapi.ws.exception import ClientException

        client = ws_client.Client(
            self.cfg.app_id,
            self.cfg.secret_text("app_secret"),
            # The SDK logs each drop and retry at ERROR; the channel says it once.
            log_level=lark.LogLevel.CRITICAL,
            event_handler=self._handler,
            domain=self.cfg.base_url,
            auto_reconnect=True,
        )
        self.client = client
        reconnect, report = client._reconnect, self.thread.report

        async def reconnect_or_give_up() -> None:
            try:
                await reconnect()
            except Exception as exc:  # the SDK gave up (or was refused): start over
                refused = isinstance(exc, ClientException)
                report("refused" if refused else "failing", f"{type(exc).__name__}: {exc}")
                lost.set()

        async def close() -> None:
            client._auto_reconnect = False
            await client._disconnect()

        client._reconnect = reconnect_or_give_up
        client._write_message = self._answers.writing(client._write_message, _rewritten)
        client._handle_data_frame = self._cards_too(client._handle_data_frame)
        client.on_reconnecting = lambda: report("lost", "connection closed")
        client.on_reconnected = lambda: report("connected", "again")
        await client._connect()
        return Up(client._ping_loop, close)


def _refused(detail: str) -> str:
    return (
        f"Feishu refused the long connection for {ERRORS.credentials} ({detail}): "
        "check the app's credentials and that events use the long connection"
    )
