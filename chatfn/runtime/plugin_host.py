"""What plugin code sees of the running bot: `BotPluginHost`, the `PluginHost` protocol
(function_calls/plugin.py) of a Bot and nothing more.

Setup, start-up and shutdown hooks, event handlers, console routes (`ConsoleCall.host`), health
and chat-name callbacks are all handed this object, never the Bot (issue 37 §2), as channels
are handed `BotChannelHost` (chatfn/runtime/channel_host.py). It delegates exactly the
protocol's members; the Bot is held in a name-mangled slot, so `host.storage`, `host.router`,
`host._bot` and every other attribute is an AttributeError naming the doors. A plugin reaches
the database only through the tables it declared: `plugin.database(host)` finds the bot's
storage in `function_calls.plugin_data`'s table of hosts, which the Bot fills when it makes
its host; the host itself has no attribute that yields it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn, TypeVar

from pydantic import BaseModel

from function_calls.plugin_data import open_tables

if TYPE_CHECKING:
    from chatfn.common.config import CoreSettings
    from chatfn.common.messages import IncomingMessage, OutgoingMessage
    from chatfn.common.metrics import Counter
    from chatfn.storage.db import Storage
    from function_calls.plugin import PluginHost
    from function_calls.spec import FunctionSpec
    from providers.base import ChatModel

__all__ = ["PLUGIN_DOORS", "BotPluginHost"]

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")

#: What a plugin may use of the bot: the `PluginHost` protocol's members, named in the error
#: any other attribute raises (as `MessageContext.storage` names the context's doors).
PLUGIN_DOORS = (
    "settings, model, section(), provide(), service(), counter(), send(), language_of(), "
    "add_function(), remove_function(), refusal_for(); its own tables through "
    "plugin.database(host) (Plugin(tables=...)) (docs/writing-functions.md)"
)


class BotPluginHost:
    """The `PluginHost` of a Bot: what plugin code is handed as `host`, and nothing more. The
    Bot's storage, router, outbox and the rest are not reachable through it.

    `bot` is the Bot (chatfn/runtime/bot.py makes this in its constructor), typed by the doors
    it has, which are all this uses of it: this module does not import the Bot's."""

    __slots__ = ("__bot", "__weakref__")

    def __init__(self, bot: PluginHost, storage: Storage) -> None:
        self.__bot = bot
        # `plugin.database(host)`: the plugin's declared tables in the bot's storage.
        open_tables(self, storage)

    def __getattr__(self, name: str) -> NoReturn:
        # Only asked for what the class does not have: anything but the doors below.
        raise AttributeError(
            f"a plugin's host has no {name!r}: it is not the Bot, and a plugin uses of the "
            f"bot only {PLUGIN_DOORS}"
        )

    def __repr__(self) -> str:
        return "<BotPluginHost: the plugin API of a running bot>"

    @property
    def settings(self) -> CoreSettings:
        return self.__bot.settings

    @property
    def model(self) -> ChatModel | None:
        return self.__bot.model

    def section(self, model: type[S]) -> S:
        return self.__bot.section(model)

    def provide(self, service: object, *, as_type: type | None = None) -> None:
        self.__bot.provide(service, as_type=as_type)

    def service(self, cls: type[T]) -> T | None:
        return self.__bot.service(cls)

    def counter(self, name: str) -> Counter:
        return self.__bot.counter(name)

    async def send(self, out: OutgoingMessage) -> None:
        await self.__bot.send(out)

    def language_of(self, platform: str, chat_id: str, is_group: bool | None = None) -> str:
        return self.__bot.language_of(platform, chat_id, is_group)

    def add_function(self, spec: FunctionSpec) -> None:
        self.__bot.add_function(spec)

    def remove_function(self, name: str) -> None:
        self.__bot.remove_function(name)

    async def refusal_for(self, function: str, message: IncomingMessage) -> str | None:
        return await self.__bot.refusal_for(function, message)


if TYPE_CHECKING:
    # mypy: the implementation has every member of the protocol, with its signature.
    def _is_a_plugin_host(bot: PluginHost, storage: Storage) -> PluginHost:
        return BotPluginHost(bot, storage)
