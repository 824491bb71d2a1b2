"""Which modules hold built-in functions. Importing one registers its functions globally;
`register_builtins` copies them into a bot's own registry.

A built-in module may also define (all optional, all public so a plugin can copy the pattern):
- `status(settings) -> (name, state, reason)`: state "on", "off" or "missing key"; a module
  that is not "on" is not registered, so the model never sees a function that cannot work;
- `setup(bot)`: wire services to the bot (scheduler, event subscribers, clients), called once
  the bot has its storage, for modules that are "on".
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING

from function_calls.registry import SPEC_ATTR, Registry

if TYPE_CHECKING:
    from runtime.bot import Bot
    from runtime.settings import Settings

BUILTIN_MODULES: tuple[str, ...] = (
    "function_calls.handlers",
    "function_calls.builtin_reminders",
    "function_calls.builtin_web_search",
    "function_calls.builtin_summary",
    "function_calls.builtin_welcome",
)


def _modules() -> list[types.ModuleType]:
    return [importlib.import_module(name) for name in BUILTIN_MODULES]


def _is_on(module: types.ModuleType, settings: Settings | None) -> bool:
    status = getattr(module, "status", None)
    return settings is None or status is None or status(settings)[1] == "on"


def register_builtins(registry: Registry, settings: Settings | None = None) -> int:
    """Register the built-in functions; with `settings`, only those of modules switched on."""
    count = 0
    for module in _modules():
        if _is_on(module, settings):
            count += registry.include(module)
    return count


def setup_builtins(bot: Bot) -> None:
    """Run `setup(bot)` of every built-in module that is on."""
    for module in _modules():
        setup = getattr(module, "setup", None)
        if setup is not None and _is_on(module, bot.settings):
            setup(bot)


def builtin_status(settings: Settings) -> list[tuple[str, str, str]]:
    """One row per built-in feature for check_system.py: (name, state, reason), state one of
    "on", "off", "missing key". A feature whose functions are all in `function_calls.disabled`
    reads "off" too."""
    rows: list[tuple[str, str, str]] = []
    disabled = set(settings.function_calls.disabled)
    for module in _modules():
        names = [
            spec.name
            for v in vars(module).values()
            if (spec := getattr(v, SPEC_ATTR, None)) is not None
        ]
        status = getattr(module, "status", None)
        if status is not None:
            name, state, reason = status(settings)
        else:
            name, state, reason = ", ".join(names) or module.__name__, "on", "always available"
        if state == "on" and names and all(n in disabled for n in names):
            state, reason = "off", "listed in function_calls.disabled"
        rows.append((name, state, reason))
    return rows
