"""What the admin console reads of the Bot, as a Protocol.

The console is built by the Bot's API host (chatfn/runtime/bot.py), so naming the `Bot` class
here would make the two modules import each other (tests/test_layers.py counts imports made
for the type checker too). The console needs only these members; the Bot has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from chatfn.common.metrics import Metrics
    from chatfn.runtime.delivery import Delivery
    from chatfn.runtime.outbox import Outbox
    from chatfn.runtime.plugin_breaker import PluginGuard
    from chatfn.runtime.plugins import LoadedPlugin
    from chatfn.runtime.restart import RestartRequest
    from chatfn.runtime.settings import Settings
    from chatfn.runtime.switch import Switch
    from chatfn.storage.db import Storage
    from function_calls.plugin import PluginHost

__all__ = ["ConsoleBot"]

T = TypeVar("T")


class ConsoleBot(Protocol):
    """The Bot as the admin console and the metric snapshots see it."""

    settings: Settings
    storage: Storage
    plugins: list[LoadedPlugin]
    guard: PluginGuard
    unwired: set[str]  # built-ins and files plugins.disabled kept from wiring at start
    switch: Switch
    delivery: Delivery
    outbox: Outbox
    metrics: Metrics
    restart: RestartRequest  # the Restart button (chatfn/runtime/restart.py)

    @property
    def plugin_host(self) -> PluginHost:
        """What plugin code (console routes, health, chat names) is handed."""
        ...

    def service(self, cls: type[T]) -> T | None: ...
