"""What a channel sees of the runtime, and what a channel declares about itself.

A channel (`channels/<name>/`, or a separately installed package) is found through the
`chatfn.channels` entry-point group (chatfn/runtime/channel_registry.py). The entry point names a
`ChannelSpec`: the channel's settings model (its `channels.<name>:` section), the extra it
needs, its health probe, its docs and a factory. The factory receives a `ChannelHost`, the one
narrow interface a channel talks to the bot through: hand in messages and system events, take
deliveries (it registers as the outbound sender of its platform), read the settings the core
offers. It never receives the `Bot` (tests/test_layers.py and tests/channels/test_spec.py keep
it so): six platforms must not come to depend on how turns, delivery or plugins work inside.

The shape follows NoneBot2's adapters (an `Adapter` class per distribution, found by entry
point, with its own config model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, cast
from weakref import WeakKeyDictionary

from pydantic import BaseModel

from chatfn.common.config import CoreSettings
from chatfn.common.messages import IncomingMessage, OutgoingMessage, StreamObserver, SystemEvent
from chatfn.runtime.channel_caps import Capabilities
from chatfn.runtime.delivery_policy import DeliveryPolicy
from chatfn.storage.history import HistoryEntry

__all__ = [
    "ApiHost",
    "Capabilities",
    "ChannelHost",
    "ChannelLogin",
    "ChannelSpec",
    "DeliveryPolicy",
    "HistoryEntry",
    "OutboundSender",
    "Probe",
    "WebListener",
    "api_of",
    "channel_state",
    "section_of",
]

if TYPE_CHECKING:
    from chatfn.common.metrics import Metrics
    from chatfn.runtime.event_stream import EventQueue
    from chatfn.runtime.exposure import Exposure
    from chatfn.runtime.outbox import Outbox
    from chatfn.runtime.web import WebServer

ReplySink = Callable[[OutgoingMessage], Awaitable[None]]
#: An aiohttp handler: `async def handler(request: web.Request) -> web.StreamResponse`.
WebHandler = Callable[[Any], Awaitable[Any]]
S = TypeVar("S", bound=BaseModel)
ProbeStatus = Literal["ok", "warn", "fail"]


class OutboundSender(Protocol):
    """What a channel is to the outbox: the sender of its platform's messages. `send` raises
    `NotDelivered` (the message waits in the outbox, retried when `host.kick()` is called or
    on the next drain) or `DeliveryRefused` (the platform refused it for good)."""

    platform: str

    async def send(self, message: OutgoingMessage) -> None: ...


class WebListener(Protocol):
    """An address of the bot's web server with its own routes (chatfn/runtime/web.py's
    `Listener`): a channel with a port setting of its own serves there."""

    @property
    def bound_port(self) -> int | None:
        """The port listened on once started (the one port 0 got)."""
        ...

    @property
    def running(self) -> bool: ...

    def listen(self, host: str, port: int) -> None:
        """Serve on `host`:`port`; call it with the routes, before the server starts."""
        ...

    def mount(self, method: str, path: str, handler: WebHandler) -> None: ...

    async def start(self) -> None:
        """Listen now, when the runtime has not started the server (a channel run alone);
        the channel that started it stops it."""
        ...

    async def stop(self) -> None: ...


class ChannelHost(Protocol):
    """The runtime as a channel sees it. Everything a channel needs and nothing else: adding a
    method here is a design decision (every channel may come to use it)."""

    @property
    def settings(self) -> CoreSettings:
        """The core's configuration (bot name, admins, grace periods, language); read only.
        The channel's own section comes to its factory as its settings model."""
        ...

    def register(self, sender: OutboundSender) -> None:
        """Take the outbox's deliveries for `sender.platform` (one sender per platform)."""
        ...

    def kick(self) -> None:
        """A connection came (back): deliver what waits in the outbox for this platform now."""
        ...

    @property
    def metrics(self) -> Metrics:
        """The bot's metrics: a channel counts what it gave up (QQ's `reply_limit` drops)."""
        ...

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        """How sends are tried again (chatfn/runtime/delivery_policy.py): the one policy the
        outbox applies; a channel's sender applies its in-place part (a short rate limit
        waited out in the chat's order)."""
        ...

    def add_web_route(self, method: str, path: str, handler: WebHandler) -> None:
        """Mount `handler` at `path` on the bot's web server (chatfn/runtime/web.py), on the
        HTTP channel's address (`channels.http.host`/`port`): a platform's webhook (Telegram
        `webhook_url`, Slack `/slack/events`, Feishu events). Call it from the channel's
        factory or constructor (the server starts once every channel is built); the route is
        outside the `/v1` token (the platform signs its requests: check that in `handler`).
        `chatfn run` refuses to start such a channel without `--channel http`."""
        ...

    def web_listener(self, name: str) -> WebListener:
        """A listener of the bot's web server for an address of the channel's own (OneBot's
        `channels.onebot.host`/`port`): its routes are served there only. `name` is the
        channel's; the runtime starts and stops it with the server."""
        ...

    async def handle(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None = None,
        *,
        on_stream: StreamObserver | None = None,
        on_stored: Callable[[], None] | None = None,
        detached: bool = False,
        stop: asyncio.Event | None = None,
    ) -> list[OutgoingMessage]:
        """Store and answer one incoming message. Its replies go to `sink` (the request
        waiting for them) or, without one, through the outbox to the platform's sender; the
        list returned is what was sent. `msg.sender_roles` carries the platform's roles of
        the sender (`"owner"`, `"admin"`: `bot.trust_group_admins`).

        `on_stored` is called once the message is durable (committed to the history, or,
        behind a cluster's gateway, confirmed by the broker), before the turn acts on it: the
        moment a channel may confirm the message to a platform that would otherwise deliver
        it again (Telegram's getUpdates offset, Slack's ack). It is not called when the
        message could not be stored, nor when the bot stops before storing it.

        `detached`: the caller going away (its task cancelled: aiohttp cancels a request's
        handler when the client disconnects) does not cancel the turn. It runs to its end in a
        task of its own, which a stop of the bot waits for like any turn; from then on its
        stream events are dropped and its replies wait in the outbox for the platform's next
        delivery (HTTP: the client's next /v1/events connection).

        `stop`: set it to stop the reply (the console's Ctrl-C): a streaming answer ends with
        what was shown so far, which is stored as the reply, and the turn asks no model again.
        """
        ...

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]:
        """A member joined, a friend request, ...: the plugins' event handlers (welcome)."""
        ...

    async def recent_chats(self, platform: str, since: datetime) -> list[tuple[str, datetime]]:
        """(chat id, time of its newest stored user message) of the chats of `platform` that
        spoke since `since`: what a reconnecting channel may have missed."""
        ...

    async def was_stored(self, platform: str, chat_id: str, message_id: str) -> bool:
        """Whether a user message with this platform id is in the history already."""
        ...

    async def load_state(self, platform: str, key: str) -> str | None:
        """What the channel of `platform` kept under `key` (`save_state`), or None: a login
        (`chatfn login NAME`), a long poll's cursor (chatfn/storage/channel_state.py)."""
        ...

    async def save_state(self, platform: str, key: str, value: str | None) -> None:
        """Keep `value` under `key` for the channel of `platform`, in the bot's database
        (None: forget it)."""
        ...


class ApiHost(Protocol):
    """What the bot's API needs beyond a channel's `ChannelHost`: the HTTP API channel (the
    outbox's event stream, history, health, metrics, the web page), `/mcp` and the MCP stdio
    channel (the bot's functions), the admin console. A channel whose spec says `api=True`
    receives it from its factory (`factory(host, settings, api)`); platform channels never
    see it."""

    @property
    def settings(self) -> CoreSettings: ...

    @property
    def closing(self) -> bool:
        """True once the bot is stopping: refuse new messages (HTTP 503, ...)."""
        ...

    @property
    def web(self) -> WebServer:
        """The bot's web server (chatfn/runtime/web.py): the API's routes, middlewares and
        lifespans mount on it; the HTTP channel gives its main listener its address."""
        ...

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        """The language of built-in strings in this chat ("en", "zh"): the web page's."""
        ...

    async def history(
        self, platform: str, chat_id: str, limit: int, before: int | None = None
    ) -> list[HistoryEntry]:
        """A chat's stored messages, oldest first: the `limit` newest (before row `before`)."""
        ...

    async def fate(self, message: int) -> dict[str, Any] | None:
        """What became of the user message of history row `message` (function_calls/fates.py),
        as `GET /v1/messages/{id}/fate` answers it; None: no such message."""
        ...

    @property
    def outbox(self) -> Outbox:
        """The outbox table's readers (`/v1/events`, the webhook)."""
        ...

    def subscribe(self, *, wake_only: bool = False) -> EventQueue:
        """A queue receiving every message the bot sends, to any chat."""
        ...

    def unsubscribe(self, queue: EventQueue) -> None: ...

    def publish(self, out: OutgoingMessage) -> None:
        """Hand a stored message to the event subscribers."""
        ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def model_name(self) -> str | None:
        """The default model's name, for health output."""
        ...

    @property
    def exposure(self) -> Exposure:
        """The bot's functions for programs (MCP): list and call them as an identity."""
        ...

    @property
    def console(self) -> Any:
        """The admin console's reads and changes, a `runtime.console.Console` (docs/admin-api.md),
        which its web side (chatfn/channels/http/admin) serves under /admin/ on the web server's
        main listener (chatfn/runtime/web_parts.py). (Typed
        loosely: runtime.console reaches runtime.settings, which finds channels through this
        module, and tests/test_layers.py allows no import cycle.)"""
        ...


@dataclass(frozen=True, slots=True)
class Probe:
    """One line of `check_system.py` about a channel: ✓ ok, ! warn, ✗ fail."""

    status: ProbeStatus
    detail: str
    name: str = ""  # default: "channel <name>"


@dataclass(frozen=True, slots=True)
class ChannelLogin:
    """A channel whose credentials come from an interactive login (a QR code scanned with a
    phone: WeChat's iLink) and are kept in the bot's database under the channel's name and
    `key` (`ChannelHost.load_state`). `chatfn login NAME` runs it (the admin console can too).

    - `flow(settings, show)`: the login; `show(kind, text)` tells the operator: kind "qr"
      (`text` is to be shown as a QR code) or "status" (a line). Returns the text to keep.
    - `apply(settings, kept)`: the channel's settings with what was kept (what `chatfn check`
      probes).
    """

    flow: Callable[[Any, Callable[[str, str], None]], Awaitable[str]]
    apply: Callable[[Any, str], Any]
    key: str = "login"


ChannelFactory = Callable[[ChannelHost, Any], Any]
ChannelCheck = Callable[[Any, bool], Awaitable[list[Probe]]]


@dataclass(frozen=True, slots=True)
class ChannelSpec(Generic[S]):
    """What a channel declares; the value of its `chatfn.channels` entry point.

    - `name`: `--channel NAME` and the `channels.NAME:` config section.
    - `settings`: the pydantic model of that section (a `common.config.Section`: unknown keys
      are errors). Every field needs a default, or the channel is configured only when used.
    - `factory(host, settings)`: builds the channel (a `channels.base.Channel`); import the
      platform SDK inside it, so finding channels stays cheap and a missing extra is an error
      only for the channel that needs it.
    - `extra`: the pip extra the channel needs (`pip install "chatfn[telegram]"`); None for
      channels that need nothing beyond chatfn.
    - `modules`: importable names the extra provides (checked by `check_system.py`).
    - `check(settings, online)`: `check_system.py`'s probe: offline a config check; with
      `online` the platform's "who am I" (a dead token gives a ✗ naming it).
    - `readme`: the channel's documentation (Markdown: how to create the bot account, token,
      permissions, a config snippet), or the path of a file holding it.
    - `adopt(core, settings)`: run once the config is validated, for a deprecated key of the
      channel's section that now lives in the core's (OneBot's `quote_replies`).
    - `api`: the channel serves the bot's API (the HTTP channel, MCP): its factory is
      `factory(host, settings, api)`, `api` the runtime's `ApiHost`.
    - `capabilities`: what the channel does on its platform (chatfn/runtime/channel_caps.py);
      docs/channels.md's capability table is generated from it.
    - `login`: a `ChannelLogin` (`chatfn login NAME`) for credentials got by logging in.
    """

    name: str
    settings: type[S]
    factory: Callable[[ChannelHost, S], Any] | Callable[[ChannelHost, S, ApiHost], Any]
    summary: str = ""
    extra: str | None = None
    modules: tuple[str, ...] = ()
    check: Callable[[S, bool], Awaitable[list[Probe]]] | None = None
    readme: str = ""
    adopt: Callable[[CoreSettings, S], None] | None = None
    api: bool = False
    capabilities: Capabilities | None = None
    login: ChannelLogin | None = None

    def build(
        self, host: ChannelHost, settings: BaseModel | None = None, api: ApiHost | None = None
    ) -> Any:
        """The channel, with `settings` (validated as this channel's model) or the host's
        `channels.<name>` section; `api` for a channel that serves the bot's API."""
        own = self.settings_from(host.settings, settings)
        if not self.api:
            return cast("Callable[[ChannelHost, S], Any]", self.factory)(host, own)
        if api is None:
            api = api_of(host)
        return cast("Callable[[ChannelHost, S, ApiHost], Any]", self.factory)(host, own, api)

    def settings_from(self, core: CoreSettings, given: BaseModel | None = None) -> S:
        if isinstance(given, self.settings):
            return given
        if given is not None:
            return self.settings.model_validate(given.model_dump())
        return section_of(core, self.name, self.settings)


#: The runtime's `ApiHost` for each `ChannelHost` it made (`provide_api`): how a channel that
#: serves the API, built from the host alone (a test, a program running one channel), finds it.
_API_HOSTS: WeakKeyDictionary[Any, ApiHost] = WeakKeyDictionary()


def provide_api(host: ChannelHost, api: ApiHost) -> None:
    """The runtime: `api` is the API of the bot behind `host`."""
    _API_HOSTS[host] = api


def api_of(host: ChannelHost) -> ApiHost:
    """The `ApiHost` of the bot behind `host` (for a channel built without one)."""
    try:
        return _API_HOSTS[host]
    except (KeyError, TypeError):
        raise LookupError("this ChannelHost has no bot API behind it: give api=") from None


def section_of(core: CoreSettings, name: str, model: type[S]) -> S:
    """The validated `channels.<name>` section of `core`, or the model's defaults (settings
    built in code without that channel found)."""
    value = getattr(getattr(core, "channels", None), name, None)
    return value if isinstance(value, model) else model()


def channel_state(name: str, sender: Any) -> dict[str, Any]:
    """A channel's state as far as it tells (the console's health panel and /healthz): a
    kit channel's `connected` and `status` (why it is down: refused credentials, the
    platform not reachable), a OneBot channel's accounts online, else up (it is registered
    and running)."""
    connected = getattr(sender, "connected", None)
    status = getattr(sender, "status", "")
    detail = status if isinstance(status, str) and not connected else ""
    accounts = getattr(sender, "self_ids", None)
    if isinstance(accounts, list):
        connected = bool(accounts)
        detail = ", ".join(accounts) if accounts else "no account connected"
    return {
        "name": name,
        "connected": bool(connected) if connected is not None else True,
        "detail": detail,
    }
