"""Bot: the plugin host and the turns. It owns the registry, the models and the storage, and
turns each incoming message into a MessageContext for the router. Beside it: `Delivery`
(chatfn/runtime/delivery.py: the outbox's front and the senders by platform), `Switch`
(chatfn/runtime/switch.py: whether turns and replies cross to other processes), `Exposure`
(chatfn/runtime/exposure.py: the functions for MCP), and `BotChannelHost` below, the `ChannelHost`
that is all its channels see of it.

Per chat, messages are handled strictly in order (one lock per chat); different chats run
concurrently. The incoming message is stored before anything else happens, so a crash or a
provider outage never loses what a user said.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from loguru import logger
from pydantic import BaseModel

from chatfn.common.i18n import language_of, translate
from chatfn.common.messages import (
    IncomingMessage,
    OutgoingMessage,
    StreamObserver,
    SystemEvent,
)
from chatfn.common.metrics import Counter, Metrics
from chatfn.runtime.approval_turns import approved_turn
from chatfn.runtime.channel_host import OutboundSender, WebHandler, provide_api
from chatfn.runtime.chat_locks import ChatLocks
from chatfn.runtime.delivery import Delivery, ReplySink
from chatfn.runtime.delivery_policy import DeliveryPolicy
from chatfn.runtime.detached import run_detached
from chatfn.runtime.event_stream import EventQueue
from chatfn.runtime.exposure import Exposure
from chatfn.runtime.model_set import ModelSet
from chatfn.runtime.outbox import Outbox
from chatfn.runtime.plugin_breaker import PluginGuard, bounded
from chatfn.runtime.plugins import LoadedPlugin, load_builtins, load_plugin_files
from chatfn.runtime.restart import RestartRequest
from chatfn.runtime.resume import resume_turns
from chatfn.runtime.settings import Settings, resolve_storage_url
from chatfn.runtime.switch import Switch, tell_stored
from chatfn.runtime.turn_writer import RelayedTurn, TurnWriter
from chatfn.runtime.web import MAIN, Listener, WebServer
from chatfn.runtime.web_parts import register as register_web_parts
from chatfn.storage import channel_state
from chatfn.storage.console.sessions import add_audit
from chatfn.storage.db import Storage, StorageError, TurnPlan, TurnStart
from chatfn.storage.history import HistoryEntry, admin_chats, chat_page
from function_calls import limits
from function_calls.approvals import Approvals
from function_calls.chat_settings import (
    ChatSettings,
    check_rules,
    replanning,
    resolve,
    rules_without_functions,
)
from function_calls.context import MessageContext
from function_calls.fates import Fate, MessageFates
from function_calls.model_access import DOOR
from function_calls.permissions import refusal_reason
from function_calls.plugin import EventHandler, Hook, PluginHost, Services
from function_calls.registry import Registry
from function_calls.router import FunctionCallRouter
from function_calls.spec import FunctionSpec
from providers.base import ChatModel

if TYPE_CHECKING:
    from chatfn.runtime.console import Console

STORAGE_FAILED = (
    "Sorry, I could not save your message (the database is busy), so I did not act on it. "
    "Please send it again in a moment."
)

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")
# The built-in channels' platforms (and the test harness's): metric labels know these.
PLATFORMS = ("console", "http", "onebot", "mcp", "test")


class Bot:
    """The running bot. Its plugins get `plugin_host` (chatfn/runtime/plugin_host.py), its
    channels `channel_host`: neither is handed the Bot."""

    def __init__(
        self,
        settings: Settings,
        *,
        registry: Registry | None = None,
        model: ChatModel | None = None,
        storage: Storage | None = None,
        builtins: bool = True,
        load_plugins: bool = True,
        models: dict[str, ChatModel] | None = None,
        clock: Callable[[], float] = time.time,
        migrate: bool = True,
    ) -> None:
        """`model`: the default model, built from `bot.model` when not given; `models`: more
        prebuilt models by name (tests); any other `models:` entry a chat uses is built on
        first use and closed at shutdown. `clock`: "now" in epoch seconds, as the model is told
        it (a benchmark or test runs a conversation over minutes of the bot's time)."""
        self.settings = settings
        self.clock = clock
        self.registry = registry if registry is not None else Registry()
        self.services = Services()
        self._event_handlers: dict[str, list[EventHandler]] = {}
        self._startup: list[Callable[[], Awaitable[None]]] = []
        self._shutdown: list[Callable[[], Awaitable[None]]] = []
        self.unwired: set[str] = set()  # built-ins and files plugins.disabled named at start
        self.plugins = self._active_plugins(builtins=builtins, user=load_plugins)
        for loaded in self.plugins:
            self.registry.include(loaded.module)
        self.storage = storage or Storage(
            resolve_storage_url(settings.storage.url, settings.base_dir),
            busy_retry=settings.storage.busy_retry,
        )
        if migrate:  # check_system reports pending migrations instead of running them
            # Start-up, before the bot takes any message; off the loop's thread all the same.
            self.storage.blocking(self.storage.create_tables)
        self.metrics = Metrics()
        # Every message's fate (function_calls/fates.py): recorded when its turn ends, read by
        # /why (a service) and GET /v1/messages/{id}/fate.
        self.fates = MessageFates(self.storage, settings.bot.resume_window, clock)
        self.services.provide(self.fates)
        # Calls held for approval (function_calls/approvals.py): asked for by the router and
        # the tool loop, answered by the approvals built-in and the console; a decided one
        # resumes its chat's turn (chatfn/runtime/approval_turns.py).
        self.approvals = Approvals(
            self.storage, settings.bot.approval_timeout, clock, metrics=self.metrics
        )
        self.approvals.runner = functools.partial(approved_turn, self)
        self.services.provide(self.approvals)
        # Messages waiting for their first reply, with the timer of their held notice.
        self._held: dict[int, asyncio.TimerHandle] = {}
        self._notices: set[asyncio.Task[None]] = set()
        self.models = ModelSet(settings, models, clock=clock)
        # Platforms a message may come from: the built-in channels' and each channel added.
        self.platforms: set[str] = set(PLATFORMS)
        self._bound_metric_labels()
        check_rules(
            settings,
            self.model_names(),
            self._function_names(),
            [g for p in self.plugins if p.plugin for g in p.plugin.patterns(settings)],
        )
        for sentence in rules_without_functions(settings, self._function_names()):
            logger.warning(sentence)
        self.model = model = self.models.set_default(model)
        self.router = FunctionCallRouter(self.registry, settings, model)
        self._locks = ChatLocks()
        # Set by chatfn/runtime/cluster.py when the turns run in other processes (gateway role), or
        # when outgoing messages go out through another process (worker role).
        self.switch = Switch()
        self.delivery = Delivery(settings, self.storage, self.metrics, self.switch)
        self.outbox = self.delivery.outbox
        # The functions offered to programs (MCP), with a chat's checks and audit.
        self.exposure = Exposure(settings, self.registry, self.router.executor, self.context)
        # The process's one web server (chatfn/runtime/web.py): the HTTP API, /mcp, the admin
        # console and the platforms' webhooks mount on it; `chatfn run` starts and stops it.
        self.web = WebServer(grace=settings.bot.shutdown_grace)
        # The console's Restart button (chatfn/runtime/restart.py): `chatfn run` stops as on
        # SIGTERM and runs its command line again.
        self.restart = RestartRequest()
        # What channels see of the bot (chatfn/runtime/channel_host.py), and what the channels
        # serving its API (HTTP, MCP) see beyond that.
        self.channel_host = BotChannelHost(self)
        # What plugin code is handed as `host` (hooks, event handlers, console routes): the
        # plugin API's doors, never the Bot itself (chatfn/runtime/plugin_host.py).
        self.plugin_host = BotPluginHost(self)
        self.api_host = BotApiHost(self)
        provide_api(self.channel_host, self.api_host)
        # The bot's own parts of the web server (chatfn/runtime/web_parts.py: /healthz and
        # /metrics, the admin console, /mcp), served wherever the main listener listens.
        register_web_parts(self.web, self.api_host)
        self.started = False
        self._closed = False
        # Set when the bot stops: channels refuse new messages; turns in flight get
        # `bot.shutdown_grace` seconds (`finish_turns`).
        self.closing = False
        self._turns: set[asyncio.Task[Any]] = set()
        self._resuming: set[asyncio.Task[Any]] = set()  # resume()'s per-chat runs
        # A circuit breaker per plugin (not the built-ins): chatfn/runtime/plugin_breaker.py;
        # it also holds the plugins the console switched off, built-ins too.
        self.guard = PluginGuard(
            settings.plugins.breaker,
            clock,
            self.metrics,
            self.registry.add,
            self.registry.remove,
            self._plugin_notice,
        )
        self.router.executor.observers.append(self._observe_call)
        plugin_names = {p.name for p in self.plugins if not p.builtin}
        self.metrics.bound("plugin", plugin_names.__contains__)
        for loaded in self.plugins:
            if not loaded.builtin:
                self.guard.watch(loaded.name, loaded.specs())
            self._wire(loaded)

    # -- plugins -----------------------------------------------------------------------------
    def _active_plugins(self, *, builtins: bool, user: bool) -> list[LoadedPlugin]:
        """The plugins the settings were validated with (or, for settings built in code, the
        built-ins and the files of `plugins.paths`), minus those whose status is not "on"."""
        loaded = self.settings.plugins_loaded
        if loaded is None:
            loaded = load_builtins()
            if user:
                loaded += load_plugin_files(self.settings.plugins.paths, self.settings.base_dir)
        wanted = [p for p in loaded if (builtins if p.builtin else user)]
        # Built-ins `plugins.disabled` names: nothing of them is wired (not their tables, hooks
        # or console views); the console may switch one on (chatfn/runtime/plugin_reload.py).
        self.unwired = {p.name for p in wanted if p.switched_off(self.settings)}
        return [p for p in wanted if p.runs(self.settings)]

    def _wire(self, loaded: LoadedPlugin) -> None:
        plugin = loaded.plugin
        if plugin is None:
            return
        # Its tables first (`Plugin(tables=...)`), so its setup finds them: every plugin's the
        # same way (function_calls/tables.py).
        tables = plugin.tables_for(self.settings)
        if tables is not None:
            self.storage.blocking(tables.ensure, self.storage.engine, plugin.name)
        for metric in plugin.metrics:  # its counters, beside the core's (`Plugin(metrics=...)`)
            self.metrics.declare(metric.name, metric.doc, list(metric.labels))
        for setup in plugin.setup_hooks:
            setup(self.plugin_host)
        guarded = None if loaded.builtin else loaded.name
        for kind, handler in plugin.event_handlers:
            if guarded is not None:
                handler = _guarded_handler(handler, guarded, self.guard)
            else:  # a built-in has no breaker, but is switched off in the console as any plugin
                handler = _unless_held(handler, loaded.name, self.guard)
            self._event_handlers.setdefault(kind, []).append(handler)
        for hook in plugin.startup_hooks:
            run = _bound(hook, self.plugin_host)
            self._startup.append(run if guarded is None else self._bounded(guarded, run))
        for hook in plugin.shutdown_hooks:
            run = _bound(hook, self.plugin_host)
            self._shutdown.append(run if guarded is None else self._unless_dead(guarded, run))

    def _bounded(
        self, plugin: str, run: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        """A plugin's start-up hook, bounded by `plugins.startup_timeout`: one that raises or
        overruns switches its plugin off, not the bot."""

        async def start() -> None:
            if self.guard.is_off(plugin):
                return
            why = await bounded(run, self.settings.plugins.startup_timeout)
            if why is not None:
                self.guard.start_failed(plugin, why)

        return start

    def _unless_dead(
        self, plugin: str, run: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        async def stop() -> None:  # a plugin that did not start is not stopped
            if not self.guard.dead(plugin):
                await run()

        return stop

    def _observe_call(self, execution: Any) -> None:
        """The executor's word on one call: a plugin's breaker counts a call that raised or
        timed out, and a call that went well."""
        plugin = self.guard.owner(execution.name)
        if execution.outcome == "ok":
            self.guard.record(plugin, ok=True)
        elif execution.outcome == "timeout" or (
            execution.outcome == "error" and execution.result is None
        ):
            self.guard.record(plugin, ok=False)

    async def _plugin_notice(self, plugin: str, why: str, reason: str, repeat: bool) -> None:
        """The admin notice of a plugin switched off (chatfn/runtime/plugin_breaker.py): a row
        of the console's audit, and a message to each admin's private chat with the bot (the
        chats of `plugins.breaker.notify` instead, where it is set), not `repeat`ed while the
        plugin keeps failing after each cool-down."""
        until = self.guard.off_until(plugin)
        detail = {"plugin": plugin, "why": why, "reason": reason}
        if until is not None:
            detail["until"] = datetime.fromtimestamp(until, UTC).isoformat()
        try:
            await self.storage.run_aside(
                add_audit, self.storage.engine, "chatfn", "", "plugin.switched_off", "", "", detail
            )
        except Exception as exc:  # the log line and the metric are there; the chats still told
            logger.error("audit row of plugin {} switched off not written: {}", plugin, exc)
        for platform, chat_id in [] if repeat else await self._admin_chats():
            text = translate(
                self.language_of(platform, chat_id), "core.plugin_off", plugin=plugin, why=why
            )
            try:
                await self.send(OutgoingMessage(platform, chat_id, text, notice=True))
            except Exception as exc:  # a notice that cannot go out must not stop the rest
                logger.error(
                    "notice of plugin {} to {}:{} not sent: {}", plugin, platform, chat_id, exc
                )

    async def _admin_chats(self) -> list[tuple[str, str]]:
        """Where an admin notice goes: `plugins.breaker.notify` where set, else the private chat
        each of `bot.admins` last wrote to the bot from (chatfn/storage/history.py)."""
        named = self.settings.plugins.breaker.notify
        if named:
            return [(t.partition(":")[0], t.partition(":")[2]) for t in named]
        admins = list(self.settings.bot.admins)
        try:
            found = await self.storage.run_aside(admin_chats, self.storage.engine, admins)
        except Exception as exc:
            logger.error("the admins' chats not read: {}", exc)
            found = []
        if not found:
            logger.warning(
                "no admin told in chat: none of bot.admins has written to the bot in private "
                "(plugins.breaker.notify names chats to tell); the console's audit has it"
            )
        return found

    def section(self, model: type[S]) -> S:
        return self.settings.section(model)

    def provide(self, service: object, *, as_type: type | None = None) -> None:
        self.services.provide(service, as_type=as_type)

    def service(self, cls: type[T]) -> T | None:
        return self.services.get(cls)

    def counter(self, name: str) -> Counter:
        return self.metrics.declared(name)

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        return language_of(self.settings, platform, chat_id, is_group)

    def add_function(self, spec: FunctionSpec) -> None:
        self.registry.add(spec)  # a name clash with another function raises, naming both

    def remove_function(self, name: str) -> None:
        self.registry.remove(name)

    async def refusal_for(self, function: str, message: IncomingMessage) -> str | None:
        spec = self.registry.get(function)
        if spec is None:
            return translate(
                self.language_of(message.platform, message.chat_id, message.is_group),
                "core.refused.gone",
                name=function,
            )
        ctx = await self.context(message, self.send)
        return refusal_reason(spec, ctx, via_command=True)

    def _function_names(self) -> set[str]:
        """Every function a `chats:` rule may name: those registered, and those of plugins
        that are off here (a rule disabling web_search must not stop a bot without its key)."""
        names = {s.name for s in self.registry.all()}
        for loaded in self.settings.plugins_loaded or load_builtins():
            names.update(s.name for s in loaded.specs())
        return names

    def model_names(self) -> list[str]:
        """The models chats may use: the `models:` entries, and any prebuilt one."""
        return self.models.names()

    def model_named(self, name: str | None) -> ChatModel | None:
        """The model `name` (built on first use), or the default model
        (chatfn/runtime/model_set.py)."""
        return self.models.named(name)

    def _bound_metric_labels(self) -> None:
        """The label values input can choose, bounded to names the bot knows (README,
        "metrics"): a function name to the registry's, a model name to the configured
        models', a channel to the known platforms; anything else is counted as `unknown`."""
        self.metrics.bound("function", lambda name: self.registry.get(name) is not None)
        # A plugin's own model (`ctx.model_request`) is counted under its plugin's name.
        plugins = {p.plugin.name for p in self.plugins if p.plugin is not None}
        self.metrics.bound("model", lambda name: self.models.knows(name) or name in plugins)
        self.metrics.bound("to", self.models.knows)
        self.metrics.bound("channel", self.platforms.__contains__)

    # -- outgoing messages (chatfn/runtime/delivery.py)
    # ---------------------------------------------
    async def send(self, out: OutgoingMessage) -> None:
        """Send a message the bot starts on its own (a reminder, a welcome)."""
        await self.delivery.deliver(out)

    # -- incoming messages -----------------------------------------------------------------
    def is_admin(self, msg: IncomingMessage) -> bool:
        if msg.admin_override is not None:
            return msg.admin_override
        return msg.sender_id in self.settings.bot.admins

    async def context(
        self, msg: IncomingMessage, deliver: ReplySink, *, stored_id: int | None = None
    ) -> MessageContext:
        """`context_for` with the chat's overrides read (off the event loop)."""
        overrides = await self.storage.run(
            self.storage.chat_state.overrides, msg.platform, msg.chat_id
        )
        return self.context_for(msg, deliver, stored_id=stored_id, overrides=overrides)

    def context_for(
        self,
        msg: IncomingMessage,
        deliver: ReplySink,
        *,
        stored_id: int | None = None,
        on_stream: StreamObserver | None = None,
        overrides: dict[str, Any] | None = None,
        chat: ChatSettings | None = None,
    ) -> MessageContext:
        """The context of `msg`, with the chat's `overrides` (`context` reads them); `chat`:
        its settings resolved already with those overrides (`_handle`: the turn's start
        resolved them, and a chat without overrides resolves the same)."""
        if chat is None:
            chat = resolve(self.settings, msg, overrides, default_model=self._default_name())
        return MessageContext(
            msg,
            is_admin=self.is_admin(msg),
            config=self.settings,
            storage=self.storage,
            deliver=deliver,
            model=self.model_named(chat.model),
            services=self.services,
            stored_id=stored_id,
            registry=self.registry,
            on_stream=on_stream,
            chat=chat,
            metrics=self.metrics,
            model_names=self.model_names(),
            clock=self.clock,
            vision_model=self.models.vision() if msg.images else None,
            model_named=self.models.named_exactly,
            model_door=DOOR,
        )

    async def handle(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None = None,
        *,
        on_stream: StreamObserver | None = None,
        on_stored: Callable[[], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> list[OutgoingMessage]:
        """Store, dispatch and answer one message; returns what the bot sent in reply.
        `on_stored`, `stop`: ChannelHost.handle's (`stop` acts on a turn run here, not on one
        a gateway hands to a worker)."""
        self.metrics.messages_in.labels(msg.platform).inc()
        remote = self.switch.remote
        if remote is not None:
            return await remote.handle(msg, sink, on_stream, on_stored)
        return await self.handle_here(
            msg, sink, on_stream=on_stream, record=True, on_stored=on_stored, stop=stop
        )

    async def _finished(self, msg: IncomingMessage, replies: int) -> None:
        """Record a resumed turn as finished (`handled_messages`, as a cluster worker does)."""
        if not msg.message_id:
            return
        args = (msg.platform, msg.chat_id, msg.message_id, "local", replies)
        try:
            await self.storage.run(self.storage.cluster.finish, *args)
        except StorageError as exc:  # the answer is out; only a resume could repeat it
            logger.error("turn of message {} not recorded as finished: {}", msg.message_id, exc)

    async def resume(self) -> int:
        """Handle, once and in chat order, the user messages of the last `bot.resume_window`
        seconds whose turn a crash cut short (chatfn/runtime/resume.py). Call before the channels
        take
        new messages; returns how many are resumed."""
        return await resume_turns(
            self.storage,
            self.settings.bot.resume_window,
            self.handle_here,
            self._finished,
            self._resuming,
        )

    async def handle_here(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None = None,
        *,
        on_stream: StreamObserver | None = None,
        stored_id: int | None = None,
        record: bool = False,
        relayed: RelayedTurn | None = None,
        on_stored: Callable[[], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> list[OutgoingMessage]:
        """`handle` in this process, whatever `remote` says (a worker's turn). `stored_id`:
        the message is already in the history (a resumed turn); `record`: the turn's end
        write records it as finished (`handled_messages`), so a start after a crash knows
        which stored messages still want an answer. `relayed`: a cluster worker's turn
        (chatfn/runtime/turn_writer.py), whose messages go to its gateway after their write and
        whose end write records it as finished; a message that cannot be stored raises
        StorageError instead of being answered here."""
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        self._hold(msg)
        if not msg.is_group or msg.is_at_bot:  # came in now: a round of an exchange or not
            self.router.loop_guard.arrived(msg)
        self.guard.tick()  # a plugin whose cool-down is over is on again for this message
        # Every log line of the turn, a provider SDK's or httpx's included, carries its ids.
        ids = {"chat_id": msg.chat_id, "message_id": msg.message_id or "-"}
        try:
            with logger.contextualize(**ids, sender_id=msg.sender_id):
                return await self._locks(
                    (msg.platform, msg.chat_id),
                    lambda: self._handle(
                        msg, sink, on_stream, stored_id, record, relayed, on_stored, stop
                    ),
                )
        finally:
            self._turns.discard(task)
            self._unhold(msg)
            self.router.loop_guard.forget(msg)

    def _hold(self, msg: IncomingMessage) -> None:
        """Start the clock of `bot.held_notice_after` for a message addressed to the bot: if no
        reply has gone out by then, its sender gets one short notice that it is waiting."""
        after = self.settings.bot.held_notice_after
        if after <= 0 or (msg.is_group and not msg.is_at_bot):
            return
        loop = asyncio.get_running_loop()
        self._held[id(msg)] = loop.call_later(after, self._tell_held, msg)

    def _unhold(self, msg: IncomingMessage) -> None:
        timer = self._held.pop(id(msg), None)
        if timer is not None:
            timer.cancel()

    def _tell_held(self, msg: IncomingMessage) -> None:
        if self._held.pop(id(msg), None) is None or self.closing:
            return
        self.metrics.message_fates.labels("held").inc()
        language = self.language_of(msg.platform, msg.chat_id, msg.is_group)
        out = OutgoingMessage(msg.platform, msg.chat_id, translate(language, "core.held"))
        out.is_group, out.notice = msg.is_group, True
        out.at = msg.sender_id if msg.is_group else None

        async def tell() -> None:
            try:
                await self.delivery.deliver(out)
            except Exception as exc:  # a notice that cannot go out must not stop the turn
                logger.error("held notice for message {} not sent: {}", msg.message_id, exc)

        task = asyncio.get_running_loop().create_task(tell())
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def run_in_chat_order(
        self, platform: str, chat_id: str, work: Callable[[], Awaitable[None]]
    ) -> None:
        """Run `work` as a turn of that chat: after the turns before it, before those after."""
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        try:
            await self._locks((platform, chat_id), work)
        finally:
            self._turns.discard(task)

    def fate_row(self, ctx: MessageContext, stored_id: int | None) -> dict[str, Any] | None:
        return self._fate_row(ctx, stored_id)

    def _fate_row(self, ctx: MessageContext, stored_id: int | None) -> dict[str, Any] | None:
        """What became of the message (function_calls/fates.py), counted, as the row the turn's
        end write records; a path that set no fate is answered when it sent something, else
        ignored."""
        fate = ctx.turn.fate
        if fate is None:
            model = ctx.model.name if ctx.model is not None else ""
            fate = Fate("answered", model) if ctx.sent else Fate("ignored", "no_answer")
        self.metrics.message_fates.labels(fate.kind).inc()
        if stored_id is None:
            return None
        msg = ctx.message
        return {
            "message": stored_id,
            "platform": msg.platform,
            "chat_id": msg.chat_id,
            "sender_id": msg.sender_id,
            "fate": fate.kind,
            "detail": fate.detail,
            "told": fate.told,
        }

    async def finish_turns(self, grace: float | None = None) -> int:
        """Stop taking messages and give the turns in flight `grace` seconds (default
        `bot.shutdown_grace`) to finish; cancel the rest. Returns how many were abandoned
        (their messages are stored; their answers are not sent)."""
        self.closing = True
        grace = self.settings.bot.shutdown_grace if grace is None else grace
        pending = {t for t in self._turns if not t.done() and t is not asyncio.current_task()}
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            logger.warning("{} turn(s) still running after {} s: abandoned", len(pending), grace)
            await asyncio.wait(pending, timeout=1)
        return len(pending)

    async def _handle(
        self,
        msg: IncomingMessage,
        sink: ReplySink | None,
        on_stream: StreamObserver | None,
        stored_id: int | None = None,
        record: bool = False,
        relayed: RelayedTurn | None = None,
        on_stored: Callable[[], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> list[OutgoingMessage]:
        writer = TurnWriter(self.storage, self.delivery, msg.platform, msg.chat_id, relayed)
        try:
            start, named, rules = await self._begin_turn(msg, stored_id, writer)
        except StorageError as exc:
            if relayed is not None:  # the worker says it (chatfn/runtime/cluster.py NOT_STORED)
                raise
            # Nothing is done with a message that is not stored: a model call, a function
            # run, would act on something the history does not hold.
            logger.error(
                "message {} in {} {} not stored, not handled: {}",
                msg.message_id,
                msg.platform,
                msg.chat_id,
                exc,
            )
            out = OutgoingMessage(msg.platform, msg.chat_id, STORAGE_FAILED, msg.is_group)
            out.notice = True
            if sink is not None:
                with contextlib.suppress(Exception):
                    await sink(out)
            return [out]
        if on_stored is not None:
            tell_stored(on_stored)

        async def deliver(out: OutgoingMessage) -> None:
            self._unhold(msg)  # a reply is going out: not held any more
            if self.switch.relay is None or relayed is not None:
                writer.stage(out, sink)  # stored with the turn's next write, then sent
            else:  # a worker's message outside a relayed turn: stored and relayed at once
                await self.delivery.deliver(out, sink)

        ctx = self.context_for(
            msg,
            deliver,
            stored_id=start.stored_id,
            on_stream=on_stream,
            overrides=start.overrides,
            # Resolved once a turn (issue 41): the start's settings are the chat's when it has
            # no overrides; with some, resolved again with them.
            chat=None if start.overrides else rules,
        )
        ctx.turn.journal = writer
        ctx.turn.start = start
        ctx.turn.limit_plan = named
        ctx.turn.stop = stop
        ended = False  # the turn ran to its end (not cancelled, nor cut by an error raised)
        try:
            await self.models.ready()  # the SDKs loading in a thread: never import on the loop
            # One registry for the whole turn: a plugin switched or reloaded meanwhile
            # (chatfn/runtime/plugin_reload.py) is seen by the next message, whole.
            with self.registry.pinned():
                await self.router.dispatch(ctx)
            ended = True
        except Exception as exc:  # the one place an unexpected bug meets the user
            ctx.logger.opt(exception=exc).error("unhandled error while handling message")
            ctx.turn.fate = Fate("failed", type(exc).__name__, told=False)
            await ctx.reply(ctx.t("core.internal_error"), notice=True)
            ctx.turn.fate = Fate("failed", type(exc).__name__, told=True)
            ended = True
        finally:
            # The turn's end: its messages, usage rows, counts and handled mark, one write.
            handled = None
            if relayed is not None:
                # A worker's turn cut short (its broker channel closed) is run again by the
                # message's redelivery: not recorded as finished.
                if ended and not relayed.failed:
                    handled = (msg.message_id, relayed.worker, len(ctx.sent))
            elif record and msg.message_id and ended:
                # A turn abandoned at shutdown is not finished: the next start resumes it.
                handled = (msg.message_id, "local", len(ctx.sent))
            # A turn abandoned (shutdown) or cut keeps no fate: held, then resumed or expired.
            fate = None
            if ended and not (relayed is not None and relayed.failed):
                fate = self._fate_row(ctx, start.stored_id)
            try:
                await asyncio.shield(writer.write(handled=handled, fate=fate))
            except StorageError as exc:  # the answer is out; only a resume could repeat it
                logger.error("turn of message {} not recorded: {}", msg.message_id, exc)
        return ctx.sent

    async def _begin_turn(
        self, msg: IncomingMessage, stored_id: int | None, writer: TurnWriter
    ) -> tuple[TurnStart, list[Any], ChatSettings]:
        """Store the message and, when it will reach a model, count it against the limits and
        read its history window, in one transaction (`Storage.begin_turn`), with the delivery
        marks waiting to be written. Returns the start, the limit checks' plan and the chat's
        settings without overrides."""
        rules = resolve(self.settings, msg, None, default_model=self._default_name())
        reaches = self.router.reaches_model(msg, rules, self.model_named(rules.model) is not None)
        named = limits.plan(self.settings, msg, self.is_admin(msg)) if reaches else []
        row = None
        if stored_id is None:
            text = msg.stored_text()
            row = {
                "platform": msg.platform,
                "chat_id": msg.chat_id,
                "role": "user",
                "sender_id": msg.sender_id,
                "sender_name": msg.sender_name,
                "text": text,
                "is_group": msg.is_group,
                "message_id": msg.message_id,
                "created_at": msg.time,
                "thinking": None,
                "is_at_bot": msg.is_at_bot,
            }
        marks = self.outbox.take_marks()
        try:
            start = await self.storage.run(
                self.storage.begin_turn,
                row,
                platform=msg.platform,
                chat_id=msg.chat_id,
                stored_id=stored_id,
                checks=[c for _, _, c in named] if reaches else None,
                notice=limits.notice_counter(named),
                history_limit=rules.history_size if reaches else 0,
                delivered=marks,
                replan=functools.partial(self._replan, msg),
                summary=self.settings.bot.compaction,  # read with a history window
            )
        except BaseException:
            self.outbox.marks_written(marks, False)
            raise
        self.outbox.marks_written(marks, True)
        if start.plan is not None:
            named = start.plan
        return start, named, rules

    def _default_name(self) -> str | None:
        return self.model.name if self.model is not None else None

    def _replan(self, msg: IncomingMessage, overrides: dict[str, Any]) -> TurnPlan | None:
        """The turn's checks and history window from the chat's settings with its overrides,
        when one of them changes those (a key declared `replans`); runs in `begin_turn`'s
        transaction on the storage thread (pure: no statement, no await)."""
        if replanning(self.settings).isdisjoint(overrides):
            return None
        chat = resolve(self.settings, msg, overrides, default_model=self._default_name())
        # As `model_named(chat.model) is not None`, without building a model on this thread.
        has_model = self.model is not None or (
            chat.model is not None and self.models.knows(chat.model)
        )
        reaches = self.router.reaches_model(msg, chat, has_model)
        named = limits.plan(self.settings, msg, self.is_admin(msg), limits=chat.limits)
        named = named if reaches else []
        checks = [c for _, _, c in named] if reaches else None
        history = chat.history_size if reaches else 0
        return TurnPlan(checks, limits.notice_counter(named), history, named)

    # -- system events ---------------------------------------------------------------------
    def on_event(self, kind: str, handler: EventHandler) -> None:
        """Handle a system event kind ("member_joined", "friend_request"); plugins declare
        theirs with `Plugin.on_event`."""
        self._event_handlers.setdefault(kind, []).append(handler)

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]:
        """Run the handlers of an event in the chat's order; returns what they sent."""
        remote = self.switch.remote
        if remote is not None:
            return await remote.handle_event(event)
        return await self.handle_event_here(event)

    async def handle_event_here(self, event: SystemEvent) -> list[OutgoingMessage]:
        """`handle_event` in this process (a worker's)."""
        self.guard.tick()

        async def work() -> list[OutgoingMessage]:
            sent: list[OutgoingMessage] = []
            for handler in self._event_handlers.get(event.kind, []):
                try:
                    sent.extend(await handler(self.plugin_host, event) or [])
                except Exception as exc:
                    logger.opt(exception=exc).error("{} handler failed", event.kind)
            return sent

        with logger.contextualize(chat_id=event.chat_id):
            return await self._locks((event.platform, event.chat_id), work)

    # -- lifecycle ---------------------------------------------------------------------------
    def on_startup(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` in `start()`: for services that need a running event loop, which a sync
        constructor cannot give them (plugins declare theirs with `Plugin.on_startup`)."""
        self._startup.append(hook)

    def on_shutdown(self, hook: Callable[[], Awaitable[None]]) -> None:
        self._shutdown.append(hook)

    async def start(self, *, services: bool = True, resume: bool = False) -> None:
        """Start services once the event loop runs; call after the channels are added, so what
        the services send at once (reminders missed while down) has a way out. A gateway
        (`services=False`) runs none: its workers run the plugins' services (reminders)."""
        if self.started:
            return
        self.started = True
        # First: it notes which rows were owed before this start (sent by its drain) before
        # any start-up hook (a reminder due while down) writes new ones.
        await self.outbox.start()
        for hook in self._startup if services else []:
            await hook()
        if services:  # expires what was not answered in time, while down included
            await self.approvals.start()
        if resume:  # a single process: no broker redelivers what a crash cut
            try:
                await self.resume()
            except StorageError as exc:
                logger.error("turns cut by the last stop not resumed: {}", exc)

    async def prepare_models(self) -> None:
        """Load the models' SDKs in a thread once the channels answer (`ModelSet.prepare`)."""
        await self.models.prepare()

    async def aclose(self) -> None:
        """Close services, model clients and the database; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self.web.stop()  # `chatfn run` stopped it after the channels; a program may not
        if any(not t.done() and t is not asyncio.current_task() for t in self._turns):
            # Turns still running (one whose client went away, in a program that did not call
            # finish_turns): abandoned before their storage closes, resumed at the next start.
            await self.finish_turns(grace=0)
        await self.approvals.stop()
        for hook in reversed(self._shutdown):
            try:
                await hook()
            except Exception as exc:  # one service failing to stop must not keep others open
                logger.opt(exception=exc).error("shutdown hook {} failed", hook)
        await self.outbox.stop()  # after the services (a reminder job's send is recorded)
        await self.models.aclose()
        self.storage.close()


def _guarded_handler(handler: EventHandler, plugin: str, guard: PluginGuard) -> EventHandler:
    """A plugin's event handler, skipped while its plugin is off, its failures counted."""

    async def handle(host: Any, event: SystemEvent) -> list[OutgoingMessage] | None:
        if guard.is_off(plugin):
            return None
        try:
            sent = await handler(host, event)
        except Exception:
            guard.record(plugin, ok=False)
            raise
        guard.record(plugin, ok=True)
        return sent

    return handle


def _unless_held(handler: EventHandler, plugin: str, guard: PluginGuard) -> EventHandler:
    """A built-in's event handler, skipped while the console has it switched off."""

    async def handle(host: Any, event: SystemEvent) -> list[OutgoingMessage] | None:
        if guard.held(plugin):
            return None
        return await handler(host, event)

    return handle


def _bound(hook: Hook, host: PluginHost) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        await hook(host)

    run.__qualname__ = getattr(hook, "__qualname__", "hook")
    return run


PLUGIN_DOORS = (
    "settings, model, section, provide, service, counter, send, language_of, add_function, "
    "remove_function, refusal_for; tables through plugin.database(host)"
)


class BotPluginHost:
    """The `PluginHost` (function_calls/plugin.py) of a Bot: what plugin code is handed as
    `host` (setup, start-up and shutdown hooks, event handlers, console routes, health and
    chat-name callbacks), and nothing more, as channels get `BotChannelHost`. The Bot's
    storage, router, outbox and the rest are not reachable through it: a plugin reaches the
    database only through the tables it declared (`plugin.database(host)`, issue 37 §2)."""

    __slots__ = ("__weakref__", "_bot")

    def __init__(self, bot: Bot) -> None:
        self._bot = bot

    def __getattr__(self, name: str) -> NoReturn:
        raise AttributeError(
            f"a plugin's host has no {name!r}: what a plugin may use of the bot is {PLUGIN_DOORS}"
        )

    @property
    def settings(self) -> Settings:
        return self._bot.settings

    @property
    def model(self) -> ChatModel | None:
        return self._bot.model

    def section(self, model: type[S]) -> S:
        return self._bot.section(model)

    def provide(self, service: object, *, as_type: type | None = None) -> None:
        self._bot.provide(service, as_type=as_type)

    def service(self, cls: type[T]) -> T | None:
        return self._bot.service(cls)

    def counter(self, name: str) -> Counter:
        return self._bot.counter(name)

    async def send(self, out: OutgoingMessage) -> None:
        await self._bot.send(out)

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        return self._bot.language_of(platform, chat_id, is_group)

    def add_function(self, spec: FunctionSpec) -> None:
        self._bot.add_function(spec)

    def remove_function(self, name: str) -> None:
        self._bot.remove_function(name)

    async def refusal_for(self, function: str, message: IncomingMessage) -> str | None:
        return await self._bot.refusal_for(function, message)

    def _storage_for_tables(self) -> Storage:
        """For `PluginDatabase.of` alone, which narrows it to one plugin's declared tables
        (function_calls/plugin_data.py); not a door of the plugin API."""
        return self._bot.storage


class BotChannelHost:
    """The `ChannelHost` (chatfn/runtime/channel_host.py) of a Bot: what its channels may use of it,
    and nothing more. Channels get this object, never the Bot."""

    __slots__ = ("__weakref__", "_bot")

    def __init__(self, bot: Bot) -> None:
        self._bot = bot

    def add_web_route(self, method: str, path: str, handler: WebHandler) -> None:
        if not path.startswith("/") or path.startswith(
            ("/v1/", "/mcp", "/metrics", "/healthz", "/admin/")
        ):
            raise ValueError(f"web route {path!r}: a path of its own (not /v1, /mcp, /metrics)")
        router = self._bot.web.main.app.router
        method = method.upper()
        for route in router.routes():
            if route.method == method and route.resource is not None:
                if route.resource.canonical == path:
                    raise ValueError(f"web route {method} {path} is served by another channel")
        self._bot.web.mount(method, path, handler)

    def web_listener(self, name: str) -> Listener:
        if name == MAIN:
            raise ValueError(f"web listener {name!r} is the HTTP channel's (add_web_route)")
        return self._bot.web.listener(name)

    @property
    def settings(self) -> Settings:
        return self._bot.settings

    def register(self, sender: OutboundSender) -> None:
        self._bot.delivery.register(sender)
        self._bot.platforms.add(sender.platform)

    def kick(self) -> None:
        self._bot.outbox.kick()

    @property
    def delivery_policy(self) -> DeliveryPolicy:
        return self._bot.outbox.policy

    @property
    def metrics(self) -> Metrics:
        return self._bot.metrics

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
        bot = self._bot
        if not detached:
            return await bot.handle(msg, sink, on_stream=on_stream, on_stored=on_stored, stop=stop)

        def turn(to: ReplySink | None, shown: StreamObserver | None) -> Awaitable[Any]:
            return bot.handle(msg, to, on_stream=shown, on_stored=on_stored, stop=stop)

        # A caller that goes away (a client's request cancelled) leaves the turn running.
        return await run_detached(turn, sink, on_stream, bot._turns)

    async def handle_event(self, event: SystemEvent) -> list[OutgoingMessage]:
        return await self._bot.handle_event(event)

    async def recent_chats(self, platform: str, since: datetime) -> list[tuple[str, datetime]]:
        storage = self._bot.storage
        return list(await storage.run(storage.cluster.recent_chats, platform, since))

    async def was_stored(self, platform: str, chat_id: str, message_id: str) -> bool:
        storage = self._bot.storage
        found = await storage.run(
            storage.cluster.stored_message, platform, chat_id, "user", message_id
        )
        return found is not None

    async def load_state(self, platform: str, key: str) -> str | None:
        storage = self._bot.storage
        return await storage.run(channel_state.load, storage.engine, platform, key)

    async def save_state(self, platform: str, key: str, value: str | None) -> None:
        storage = self._bot.storage
        await storage.run(channel_state.save, storage.engine, platform, key, value)


class BotApiHost:
    """The `ApiHost` (chatfn/runtime/channel_host.py) of a Bot: what the channels serving its API
    (HTTP, MCP) and the admin console need beyond a `ChannelHost`."""

    __slots__ = ("_bot", "_console")

    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self._console: Console | None = None

    @property
    def settings(self) -> Settings:
        return self._bot.settings

    @property
    def closing(self) -> bool:
        return self._bot.closing

    @property
    def web(self) -> WebServer:
        return self._bot.web

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        return self._bot.language_of(platform, chat_id, is_group)

    async def fate(self, message: int) -> dict[str, Any] | None:
        found = await self._bot.fates.of(message)
        return None if found is None else found.as_json()

    async def history(
        self, platform: str, chat_id: str, limit: int, before: int | None = None
    ) -> list[HistoryEntry]:
        storage = self._bot.storage
        # A page of GET /v1/history: beside the turns, never queued behind their writes.
        return await storage.run_aside(chat_page, storage.engine, platform, chat_id, limit, before)

    @property
    def outbox(self) -> Outbox:
        return self._bot.outbox

    def subscribe(self, *, wake_only: bool = False) -> EventQueue:
        return self._bot.delivery.subscribe(wake_only=wake_only)

    def unsubscribe(self, queue: EventQueue) -> None:
        self._bot.delivery.unsubscribe(queue)

    def publish(self, out: OutgoingMessage) -> None:
        self._bot.delivery.publish(out)

    @property
    def metrics(self) -> Metrics:
        return self._bot.metrics

    @property
    def model_name(self) -> str | None:
        return self._bot.model.name if self._bot.model is not None else None

    @property
    def exposure(self) -> Exposure:
        return self._bot.exposure

    @property
    def console(self) -> Console:
        """Made on first use: a bot without `admin.users` never builds one."""
        if self._console is None:
            from chatfn.runtime.console import Console

            self._console = Console(self._bot)
        return self._console
