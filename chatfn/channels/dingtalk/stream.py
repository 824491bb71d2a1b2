"""`mode: stream`: DingTalk's Stream connection through its official Python SDK
(dingtalk-stream, https://github.com/open-dingtalk/dingtalk-stream-sdk-python; the protocol:
https://open.dingtalk.com/document/direction/stream-mode-protocol-access-description).

The SDK's frames, handlers and acks are used as they are: a `CallbackHandler` registered for
the robot's topic (/v1.0/im/bot/messages/get) answers each message, and the SDK's
`DingTalkStreamClient.route_message` reads every frame (CALLBACK, EVENT, SYSTEM ping and
disconnect), calls the handler and writes the ack frame ({"code", "headers": {"messageId"},
"message", "data"}) on the socket. What is not used is the SDK's `start()` loop: it asks for
the connection with a blocking `requests.post` inside the event loop, to an address fixed at
import (`DingTalkStreamClient.OPEN_CONNECTION_API`, from the DINGTALK_OPENAPI_ENDPOINT
environment variable: one address per process), swallows refused credentials into an endless
10-second retry, and never says when it is up. So this module asks for the endpoint and ticket
itself (api.py's `open_connection`, under `api_base`, with the SDK's own subscription list and
`ua`), opens the WebSocket with `websockets` (the SDK's dependency) and hands each frame to
`route_message` with the socket set as the SDK's `client.websocket`, one task per frame as the
SDK does. Those two (`route_message`, `websocket`) are not documented API: the extra pins
dingtalk-stream to the versions tested.

Ack: a robot message is acknowledged 200 once it is stored (chatfn/channels/intake.py), or
500 when it is not within `ACK_WAIT` seconds. DingTalk documents robot messages as
fire-and-forget (its FAQ: not pushed again on a timeout) and events as pushed again until
acknowledged; a message that does come again (a resend, a new connection) is recognised by
its `msgId` and handled once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote_plus

from loguru import logger

from chatfn.channels import kit
from chatfn.channels.dingtalk.api import CREDENTIALS_FIX as FIX
from chatfn.channels.dingtalk.api import ERRORS, DingTalkApi
from chatfn.channels.dingtalk.settings import DingTalkSettings

__all__ = ["ACK_WAIT", "StreamLink"]

ACK_WAIT = 2.5
#: What a robot message is handed to: whether it may be acknowledged as handled.
OnMessage = Callable[[dict[str, Any]], Awaitable[bool]]


def _client(settings: DingTalkSettings, on_message: OnMessage) -> Any:
    import dingtalk_stream
    from dingtalk_stream import AckMessage, CallbackHandler, ChatbotMessage

    class RobotHandler(CallbackHandler):
        async def process(self, callback: Any) -> tuple[int, str]:
            data = callback.data if isinstance(callback.data, dict) else {}
            if await on_message(data):
                return AckMessage.STATUS_OK, "OK"
            return AckMessage.STATUS_SYSTEM_EXCEPTION, "not stored yet"

    credential = dingtalk_stream.Credential(
        settings.client_id, settings.secret_text("client_secret")
    )
    client = dingtalk_stream.DingTalkStreamClient(credential, logger=_quiet_logger())
    client.register_callback_handler(ChatbotMessage.TOPIC, RobotHandler())
    client.pre_start()
    return client


def _quiet_logger() -> Any:
    """The SDK logs through `logging`; its lines go to loguru at their level."""
    import logging

    class ToLoguru(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logger.log(record.levelname, "dingtalk-stream: {}", record.getMessage())

    sdk = logging.getLogger("chatfn.dingtalk_stream")
    if not sdk.handlers:
        sdk.addHandler(ToLoguru())
        sdk.propagate = False
        sdk.setLevel(logging.INFO)
    return sdk


def subscriptions(client: Any) -> list[dict[str, str]]:
    """What the SDK subscribes to (its open_connection's list): the registered callbacks."""
    topics = [{"type": "CALLBACK", "topic": t} for t in client.callback_handler_map]
    if getattr(client, "_is_event_required", False):
        topics.insert(0, {"type": "EVENT", "topic": "*"})
    return topics


class StreamLink:
    """One app's Stream connection: `session()`, one at a time (module docstring)."""

    def __init__(
        self,
        settings: DingTalkSettings,
        api: DingTalkApi,
        on_message: OnMessage,
        on_up: Callable[[], None],
    ) -> None:
        self.cfg = settings
        self.api = api
        self.client = _client(settings, on_message)
        self.on_up = on_up
        self.connections = 0  # tests
        self._ws: Any = None
        self._frames: set[asyncio.Task[Any]] = set()

    async def session(self) -> None:
        """One connection, read until it ends; raises why (refused credentials, Unreachable)
        for the channel's read loop (`PlatformChannel.serve_polls`: again after a backoff)."""
        try:
            await self._read()
        except (kit.CredentialsRefused, kit.Unreachable):
            raise
        except Exception as exc:  # websockets' own errors: passing trouble
            raise kit.Unreachable(f"DingTalk Stream connection lost ({exc!r})") from None
        raise kit.Unreachable("DingTalk Stream connection closed")

    async def _read(self) -> None:
        """The ticket, the socket, its frames until it closes."""
        import websockets
        from dingtalk_stream import DingTalkStreamClient
        from dingtalk_stream.version import VERSION_STRING

        ua = f"dingtalk-sdk-python/v{VERSION_STRING}-union chatfn"
        with ERRORS.connecting("Stream connection", self.cfg.api_base, FIX):
            opened = await self.api.open_connection(subscriptions(self.client), ua)
        uri = f"{opened['endpoint']}?ticket={quote_plus(str(opened['ticket']))}"
        async with websockets.connect(uri, open_timeout=15, ping_interval=30) as ws:
            self._ws = ws
            self.client.websocket = ws
            self.connections += 1
            self.on_up()
            async for raw in ws:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    logger.warning("DingTalk Stream frame that is not JSON ignored")
                    continue
                if isinstance(frame, dict):
                    self._spawn(self._route(ws, frame, DingTalkStreamClient.TAG_DISCONNECT))

    def _spawn(self, job: Awaitable[None]) -> None:
        task = asyncio.ensure_future(job)
        self._frames.add(task)
        task.add_done_callback(self._frames.discard)

    async def _route(self, ws: Any, frame: dict[str, Any], disconnect: str) -> None:
        """One frame through the SDK (its handler, its ack); a disconnect frame closes the
        socket, as the SDK does (DingTalk cuts it 10 s later anyway)."""
        try:
            if await self.client.route_message(frame) == disconnect:
                await ws.close()
        except Exception as exc:  # noqa: BLE001 - a socket gone while acking: the read loop sees it
            logger.debug("DingTalk Stream frame not answered: {!r}", exc)

    async def close(self) -> None:
        for task in list(self._frames):
            task.cancel()
        await asyncio.gather(*self._frames, return_exceptions=True)
        if self._ws is not None:
            await self._ws.close()

    async def drop(self) -> None:
        """Close the socket (tests: as if the network dropped it)."""
        if self._ws is not None:
            await self._ws.close()
