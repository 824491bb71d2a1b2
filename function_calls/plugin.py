"""What a plugin file may declare besides its functions: a settings section, start-up and
shut-down hooks, system-event handlers, a status line, and typed services for its handlers.

Built-ins use exactly this door (see `function_calls/builtins/`), so a third-party plugin can do
anything a built-in does:

    class WeatherSettings(BaseModel):
        units: Literal["metric", "imperial"] = "metric"

    plugin = Plugin("weather", settings=WeatherSettings)   # the `weather:` section of config

    @plugin.on_startup
    async def connect(host: PluginHost) -> None:
        host.provide(WeatherClient(host.section(WeatherSettings)))

    @tool_function(description="Current weather in a city.")
    async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
        client = ctx.service(WeatherClient)            # typed, no string keys
        units = ctx.settings(WeatherSettings).units
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from chatfn.common.chat_keys import ChatKey
from chatfn.common.config import CoreSettings
from chatfn.common.i18n import add_texts
from chatfn.common.messages import IncomingMessage, OutgoingMessage, SystemEvent
from chatfn.common.metrics import Counter
from function_calls.console import ConsoleView
from function_calls.programs import ProgramCaller
from function_calls.tables import Tables

if TYPE_CHECKING:
    from function_calls.plugin_data import PluginDatabase
    from function_calls.spec import FunctionSpec
    from providers.base import ChatModel

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")

State = Literal["on", "off", "missing key"]

#: What a plugin may ask for in `Plugin(permissions=...)`, and what each means to an operator.
PERMISSIONS: dict[str, str] = {
    "network": "connects to other hosts",
    "filesystem": "reads or writes files",
    "admin": "has admin functions",
    "model": "makes model calls",
}


@dataclass(frozen=True, slots=True)
class Status:
    """One line of `check_system.py`. Only a plugin whose state is "on" has its functions
    registered, so the model never sees a function that can only fail."""

    state: State
    detail: str


class PluginHost(Protocol):
    """What hooks and event handlers get: the running bot, seen through the plugin API."""

    @property
    def settings(self) -> CoreSettings: ...

    @property
    def model(self) -> ChatModel | None: ...

    def section(self, model: type[S]) -> S:
        """The validated config section declared with `model`."""
        ...

    def provide(self, service: object, *, as_type: type | None = None) -> None:
        """Make `service` reachable from handlers as `ctx.service(type(service))`."""
        ...

    def service(self, cls: type[T]) -> T | None: ...

    def counter(self, name: str) -> Counter:
        """A counter the plugin declared (`Plugin(metrics=[Metric(name, ...)])`):
        `host.counter("chatfn_notes_added").labels("group").inc()`."""
        ...

    async def send(self, out: OutgoingMessage) -> None:
        """Send a message the bot starts on its own (a reminder, a welcome): stored, then
        delivered by the channel of `out.platform`."""
        ...

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        """The language the bot speaks in that chat (for `translate(language, key)`): a
        `chats:` rule's `language`, else `bot.language`. `is_group` None: read from the id."""
        ...

    def add_function(self, spec: FunctionSpec) -> None:
        """Register a function while the bot runs (an MCP server's tool, built with
        `schema_function`): from the next message on, the model and slash commands see it."""
        ...

    def remove_function(self, name: str) -> None:
        """Unregister a function added with `add_function` (a tool its server no longer lists)."""
        ...

    async def refusal_for(self, function: str, message: IncomingMessage) -> str | None:
        """Why `message`'s sender may not run `function` there now (None: they may): the
        permission rules, applied to work a plugin does later on someone's behalf."""
        ...


@dataclass(frozen=True, slots=True)
class Metric:
    """A counter of a plugin's, in the bot's /metrics and a worker's snapshots like the core's:
    `name` chatfn_<plugin>_..., `labels` its label names (each value a series kept for the
    process's life: labels whose values input chooses must be bounded)."""

    name: str
    doc: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One line a plugin adds to `chatfn check`."""

    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str


Hook = Callable[[PluginHost], Awaitable[None]]
SetupHook = Callable[[PluginHost], None]
EventHandler = Callable[[PluginHost, SystemEvent], Awaitable[list[OutgoingMessage] | None]]
ChatNames = Callable[[PluginHost], dict[tuple[str, str], str]]


class Services:
    """Objects plugins provide to handlers, keyed by their type."""

    def __init__(self) -> None:
        self._by_type: dict[type, object] = {}

    def provide(self, service: object, *, as_type: type | None = None) -> None:
        self._by_type[as_type or type(service)] = service

    def get(self, cls: type[T]) -> T | None:
        found = self._by_type.get(cls)
        if found is None:  # a subclass registered under its own type still answers
            found = next((s for s in self._by_type.values() if isinstance(s, cls)), None)
        return found  # type: ignore[return-value]


@dataclass(eq=False)
class Plugin(Generic[S]):
    """The declarations of one plugin module. Create one at module level; the loader finds it.

    `settings`: a Pydantic model validated from the top-level config section `section` (the
    plugin's name by default). A bad value stops the bot at start naming the key path; a
    section nobody declares is an error too.

    `texts`: the plugin's words in each language, `{"en": {key: text}, "zh": {...}}`, merged
    into the catalogue when the plugin is declared (`ctx.t(key)`, `translate(language, key)`;
    `help.fn.<function>` is a function's line in `/help`). English is the reference; a key the
    core or another plugin has is refused.

    `chat_keys`: the plugin's per-chat keys (`ChatKey(name, type, default, override=...)`), each
    declared once: a `chats:` rule may name them (validated as the type says, a bad value naming
    `chats[i].<name>`), `/settings` and the console's chat form show them, an overridable one
    the console sets for one chat, and handlers read the value with `ctx.chat.get(key)`.

    `console`: its admin console views (`ConsoleView`: JSON routes under `/admin/api/`, a page
    module, its words and its scope rule, the lists of its health answer the console draws;
    function_calls/console.py). `@plugin.health`: what the console's health panel and plugins
    page show of it while it runs; `@plugin.check`: its lines in `chatfn check` (offline: the
    config; `--online`: the services it talks to). `@plugin.chat_names`: names it knows for
    chats, shown by the console; `@plugin.program_caller`: who an MCP client is, from its
    section.

    `tables`: its tables (`Tables(metadata, version, migrations, after)`, or a function of its
    section returning them or None), created and migrated by the runtime when the bot is built
    and by `chatfn migrate`, the same way for every plugin (function_calls/tables.py).

    `metrics`: its counters (`Metric(name, doc, labels)`), declared with the bot's metrics when
    the bot is built; hooks count with `host.counter(name)`, functions with `ctx.counter(name)`.
    """

    name: str
    settings: type[S] | None = None
    section: str | None = None
    texts: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)
    chat_keys: Sequence[ChatKey[Any]] = field(default_factory=tuple, repr=False)
    console: Sequence[ConsoleView] = field(default_factory=tuple, repr=False)
    tables: Tables | Callable[[Any], Tables | None] | None = field(default=None, repr=False)
    metrics: Sequence[Metric] = field(default_factory=tuple, repr=False)
    setup_hooks: list[SetupHook] = field(default_factory=list, repr=False)
    startup_hooks: list[Hook] = field(default_factory=list, repr=False)
    shutdown_hooks: list[Hook] = field(default_factory=list, repr=False)
    event_handlers: list[tuple[str, EventHandler]] = field(default_factory=list, repr=False)
    _status: Callable[[Any], Status] | None = field(default=None, repr=False)
    _patterns: Callable[[Any], list[str]] | None = field(default=None, repr=False)
    _health: Callable[[PluginHost, bool], dict[str, Any]] | None = field(default=None, repr=False)
    _check: Callable[[Any, bool], list[CheckLine]] | None = field(default=None, repr=False)
    _adopt: Callable[[CoreSettings, Any], None] | None = field(default=None, repr=False)
    _program_caller: Callable[[Any], ProgramCaller | None] | None = field(default=None, repr=False)
    _chat_names: ChatNames | None = field(default=None, repr=False)
    # What an operator is shown (`chatfn check`, `chatfn plugin list`, the install prompt);
    # left empty, an installed package's own metadata fills them (chatfn/runtime/plugin_registry).
    description: str = ""
    version: str = ""
    homepage: str = ""
    author: str = ""
    # The chatfn versions it works with, a specifier (">=0.2,<0.3"): a running chatfn outside
    # it leaves the plugin unloaded. Empty: its distribution's requirement on chatfn, if any.
    chatfn: str = ""
    # What it asks for, of PERMISSIONS: "network", "filesystem", "admin" (admin functions),
    # "model" (model calls). Shown before an install; read from the source, never run.
    permissions: tuple[str, ...] = ()
    # Whether the console may switch it on, off, reconfigure or upgrade it while the bot runs
    # (the next message sees the change). False: such a change says a restart is needed (a
    # plugin holding state its hooks cannot hand over, threads, open connections).
    reload: bool = True

    def __post_init__(self) -> None:
        if self.settings is not None and self.section is None:
            self.section = self.name
        if self.texts:
            add_texts(self.name, self.texts)
        self.chat_keys = tuple(replace(k, owner=self.name) for k in self.chat_keys)

    # -- decorators ------------------------------------------------------------------------------
    def status(self, func: Callable[[S], Status]) -> Callable[[S], Status]:
        """`func(section) -> Status`: whether the plugin can work with this config, and why."""
        self._status = func
        return func

    def function_patterns(self, func: Callable[[S], list[str]]) -> Callable[[S], list[str]]:
        """`func(section) -> ["prefix__*", ...]`: glob patterns of the names of functions the
        plugin registers only once it runs (MCP tools), so config naming them is valid."""
        self._patterns = func
        return func

    def health(
        self, func: Callable[[PluginHost, bool], dict[str, Any]]
    ) -> Callable[[PluginHost, bool], dict[str, Any]]:
        """`func(host, detail) -> {key: JSON}`: the plugin's state while it runs (its
        connections, its backlog), merged into the console's health panel (`detail` False: a
        summary) and its plugins page (`detail` True)."""
        self._health = func
        return func

    def check(
        self, func: Callable[[S, bool], list[CheckLine]]
    ) -> Callable[[S, bool], list[CheckLine]]:
        """`func(section, online) -> [CheckLine(name, "ok" | "warn" | "fail", detail)]`: its
        lines in `chatfn check` (with `online`, it may try the services it uses)."""
        self._check = func
        return func

    def adopt(self, func: Callable[[CoreSettings, S], None]) -> Callable[[CoreSettings, S], None]:
        """`func(settings, section)`: run once the config is validated, to carry an old key of
        the plugin's section over to where it lives now (as a channel spec's `adopt`)."""
        self._adopt = func
        return func

    def program_caller(
        self, func: Callable[[S], ProgramCaller | None]
    ) -> Callable[[S], ProgramCaller | None]:
        """`func(section) -> ProgramCaller | None`: who a program calling the bot's functions
        (an MCP client) is, as the plugin's section says (function_calls/programs.py); asked
        whether the plugin runs or not. None: the plugin does not say."""
        self._program_caller = func
        return func

    def chat_names(self, func: ChatNames) -> ChatNames:
        """`func(host) -> {(platform, chat_id): name}` (run on a storage thread): the names the
        plugin knows for chats, which the console's chat list, chat page and usage page show
        (the reminders built-in: the chat name each reminder was set with)."""
        self._chat_names = func
        return func

    def on_setup(self, func: SetupHook) -> SetupHook:
        """Run when the bot is built (sync): wire services that need no event loop."""
        self.setup_hooks.append(func)
        return func

    def on_startup(self, func: Hook) -> Hook:
        """Run when the bot starts, after channels are added (the event loop is running)."""
        self.startup_hooks.append(func)
        return func

    def on_shutdown(self, func: Hook) -> Hook:
        """Run when the bot stops, in reverse order of start-up."""
        self.shutdown_hooks.append(func)
        return func

    def on_event(self, kind: str) -> Callable[[EventHandler], EventHandler]:
        """Handle a system event ("member_joined", "friend_request") in its chat's order."""

        def register(func: EventHandler) -> EventHandler:
            self.event_handlers.append((kind, func))
            return func

        return register

    # -- queries ---------------------------------------------------------------------------------
    def patterns(self, settings: CoreSettings) -> list[str]:
        if self._patterns is None:
            return []
        section = settings.section(self.settings) if self.settings is not None else None
        return self._patterns(section)

    def adopt_into(self, settings: CoreSettings) -> None:
        if self._adopt is not None:
            section = settings.section(self.settings) if self.settings is not None else None
            self._adopt(settings, section)

    def tables_for(self, settings: CoreSettings) -> Tables | None:
        """The tables this configuration needs (None: none)."""
        if self.tables is None or isinstance(self.tables, Tables):
            return self.tables
        section = settings.section(self.settings) if self.settings is not None else None
        return self.tables(section)

    def database(self, source: Any) -> PluginDatabase:
        """This plugin's tables in the bot's database (function_calls/plugin_data.py): what a
        plugin reads and writes its rows through, instead of the whole `Storage`. `source`
        is the `PluginHost` its hooks get or the `MessageContext` of a handler."""
        from function_calls.plugin_data import PluginDatabase

        core = source.config if hasattr(source, "message") else source.settings
        return PluginDatabase.of(source, self.name, self.tables_for(core))

    def program_caller_of(self, settings: CoreSettings) -> ProgramCaller | None:
        if self._program_caller is None:
            return None
        section = settings.section(self.settings) if self.settings is not None else None
        return self._program_caller(section)

    def names_of_chats(self, host: PluginHost) -> dict[tuple[str, str], str]:
        return self._chat_names(host) if self._chat_names is not None else {}

    def health_of(self, host: PluginHost, detail: bool = False) -> dict[str, Any]:
        return self._health(host, detail) if self._health is not None else {}

    def checks(self, settings: CoreSettings, online: bool) -> list[CheckLine]:
        if self._check is None:
            return []
        section = settings.section(self.settings) if self.settings is not None else None
        return self._check(section, online)

    def state(self, settings: CoreSettings) -> Status:
        if self._status is None:
            return Status("on", "always available")
        section = settings.section(self.settings) if self.settings is not None else None
        return self._status(section)
