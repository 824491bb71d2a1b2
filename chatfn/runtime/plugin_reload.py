"""Changing a running bot's plugins without a restart (the console's Plugins page): switching
one off and on, giving it new settings, loading a version just installed or upgraded.

Each change is one swap of the registry (`Registry.replace`, copy-on-write): a turn runs with
the registry it started with (`Registry.pinned`, chatfn/runtime/bot.py), so a message in
flight finishes with the plugin as it was, the next message sees the change whole, and no
message is dropped or answered twice. A plugin declaring `Plugin(reload=False)`, and a new
version with parts only a start wires (hooks, tables, console views, per-chat keys, metrics),
says a restart is needed instead. The built-ins are switched off and on the same way (not a
required one, `REQUIRED_BUILTINS`); switching off one whose start-up hooks started work (a
scheduler, connections) says that work stops at the next start.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from loguru import logger

from chatfn.runtime.plugin_registry import GROUP, _load_one
from chatfn.runtime.plugins import LoadedPlugin

if TYPE_CHECKING:
    from function_calls.plugin import Plugin


class RestartNeeded(Exception):
    """The change is made on disk or in the config; it takes effect at the next start."""


@dataclass
class Change:
    plugin: str
    done: str  # "switched off", "reloaded", ...
    restart: str | None = None  # why a restart is needed (None: in effect now)

    def json(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "done": self.done, "restart": self.restart}


def wired_only_at_start(plugin: Plugin[Any] | None) -> list[str]:
    """The parts of `plugin` a running bot cannot swap (they are wired once, at start)."""
    if plugin is None:
        return []
    parts = {
        "start-up/shutdown/setup hooks": plugin.startup_hooks
        or plugin.shutdown_hooks
        or plugin.setup_hooks,
        "event handlers": plugin.event_handlers,
        "console views": plugin.console,
        "tables": plugin.tables,
        "per-chat keys": plugin.chat_keys,
        "metrics": plugin.metrics,
    }
    return [name for name, present in parts.items() if present]


def _still_running(loaded: LoadedPlugin) -> str | None:
    """Why switching `loaded` off now is not all of it: what its start-up hooks started (a
    scheduler, connections, functions they added) runs until a restart."""
    plugin = loaded.plugin
    if plugin is None or not plugin.startup_hooks:
        return None
    return (
        f"{loaded.name}'s functions are off now; what its start-up hooks started "
        "(a scheduler, connections) stops at the next start"
    )


class PluginSwitch:
    """One per bot: the console's changes to its plugins, one at a time."""

    def __init__(self, bot: Any) -> None:  # the Bot (chatfn/runtime/bot.py)
        self.bot = bot
        self.lock = asyncio.Lock()
        self.restart: dict[str, str] = {}  # plugin -> why its change waits for a restart

    # -- what is loaded -------------------------------------------------------------------
    def loaded(self, name: str) -> LoadedPlugin | None:
        return next((p for p in self.bot.plugins if p.name == name), None)

    def find(self, name: str) -> LoadedPlugin | None:
        """`loaded`, or a built-in or plugin file `plugins.disabled` kept from being wired at
        start."""
        found = self.loaded(name)
        if found is None and name in self.bot.unwired:
            found = next((p for p in self._list() if p.name == name and not p.installed), None)
        return found

    def _list(self) -> list[LoadedPlugin]:
        found = self.bot.settings.plugins_loaded
        return found if found is not None else self.bot.plugins

    # -- on and off -----------------------------------------------------------------------
    def switch(self, name: str, on: bool) -> Change:
        """`name` off (its functions out of the registry, its event handlers and console views
        skipped) or on again, for the next message. A built-in as any plugin, but a required
        one (`REQUIRED_BUILTINS`); one `plugins.disabled` kept from being wired at start is
        wired now where it has only functions, else at the next start."""
        loaded = self.find(name)
        if loaded is None:
            raise LookupError(f"no plugin {name} is loaded")
        if loaded.required:
            raise ValueError(f"{name} is a required built-in: the bot's own replies point to it")
        guard, registry = self.bot.guard, self.bot.registry
        names = [s.name for s in loaded.specs()]
        if name in self.bot.unwired:
            return self._unwired(loaded, on)
        still = _still_running(loaded)
        if not on:
            guard.hold(name)
            registry.replace(names, [])
            logger.info("plugin {} switched off in the console", name)
            if still is not None:
                self.restart.setdefault(name, still)
            return Change(name, "off", still)
        self._forget(name, still)
        if guard.release(name):
            registry.replace(names, loaded.specs())
        logger.info("plugin {} switched on in the console", name)
        return Change(name, "on")

    def _unwired(self, loaded: LoadedPlugin, on: bool) -> Change:
        """A built-in or plugin file nothing of which was wired at start: off stays off; on is
        wired now when it has only functions (and texts, settings), else at the next start."""
        name = loaded.name
        parts = wired_only_at_start(loaded.plugin)
        why = f"{name} has {', '.join(parts)}: it comes on at the next start"
        if not on:
            self._forget(name, why)
            return Change(name, "off")
        if parts:
            self.restart.setdefault(name, why)
            return Change(name, "on", why)
        own = loaded.plugin.state(self.bot.settings) if loaded.plugin is not None else None
        if not loaded.builtin:  # a plugin file: under its breaker as if wired at start
            self.bot.guard.watch(name, loaded.specs())
        if own is None or own.state == "on":  # not off by its own `enabled: false`
            self.bot.registry.replace([], loaded.specs())
        self.bot.plugins.append(loaded)
        self.bot.unwired.discard(name)
        logger.info("plugin {} switched on in the console", name)
        return Change(name, "on")

    def _forget(self, name: str, why: str | None) -> None:
        """The restart an earlier switch asked for (`why`) is not needed any more (another
        change's reason is kept)."""
        if why is not None and self.restart.get(name) == why:
            del self.restart[name]

    # -- settings -------------------------------------------------------------------------
    def configure(self, name: str, section: str, value: Any) -> Change:
        """`value`, the new validated section of `name`, in force from the next message."""
        loaded = self.loaded(name)
        if loaded is not None and loaded.plugin is not None and not loaded.plugin.reload:
            why = f"{name} declares it cannot reload: restart the bot for its new settings"
            self.restart[name] = why
            return Change(name, "saved", why)
        if section not in type(self.bot.settings).model_fields:  # loaded after the start
            why = f"{name} was loaded after the start: restart the bot for its settings"
            self.restart[name] = why
            return Change(name, "saved", why)
        # The section is read when a handler runs (`ctx.settings`, `host.section`).
        self.bot.settings.__dict__[section] = value
        logger.info("plugin {}: new settings in force", name)
        return Change(name, "configured")

    # -- a version installed, upgraded or removed ---------------------------------------------
    def installed(self, dist_name: str, entry_names: list[str]) -> list[Change]:
        """The packages' entry points `entry_names` were just installed or upgraded: load
        the new code and swap it in where the plugin allows."""
        importlib.invalidate_caches()
        points = {p.name: p for p in entry_points(group=GROUP)}
        changes = []
        for entry in entry_names:
            point = points.get(entry)
            if point is None:
                changes.append(Change(entry, "installed", "its entry point is not found yet"))
                continue
            changes.append(self._load(entry, point))
        return changes

    def _load(self, name: str, point: Any) -> Change:
        old = self.loaded(name)
        why = self._cannot_reload(old)
        if why is not None:
            self.restart[name] = why
            return Change(name, "installed", why)
        _forget_modules(point.module)
        taken = {p.name for p in self._list() if p.name != name}
        try:
            new = _load_one(point, taken)
        except Exception as exc:  # the new code does not load: the old one keeps running
            why = f"the new version does not load ({type(exc).__name__}: {exc})"
            self.restart[name] = why
            logger.error("plugin {}: {}", name, why)
            return Change(name, "installed", why)
        why = self._cannot_reload(new, new=True)
        if why is not None:
            self.restart[name] = why
            return Change(name, "installed", why)
        self._swap(old, new)
        self.restart.pop(name, None)
        version = new.meta.version if new.meta is not None else ""
        logger.info("plugin {} {} loaded while running", name, version)
        return Change(name, "reloaded" if old is not None else "loaded")

    def removed(self, entry_names: list[str]) -> list[Change]:
        """The package of `entry_names` was uninstalled: its functions go now."""
        changes = []
        for name in entry_names:
            old = self.loaded(name)
            why = self._cannot_reload(old)
            if old is None or why is not None:
                if why is not None:
                    self.restart[name] = why
                changes.append(Change(name, "removed", why))
                continue
            self._swap(old, None)
            changes.append(Change(name, "removed"))
        return changes

    def _cannot_reload(self, loaded: LoadedPlugin | None, *, new: bool = False) -> str | None:
        if loaded is None or loaded.plugin is None:
            return None
        which = "its new version" if new else loaded.name
        if not loaded.plugin.reload:
            return f"{which} declares it cannot reload: restart the bot"
        parts = wired_only_at_start(loaded.plugin)
        if parts:
            return f"{which} has {', '.join(parts)}: restart the bot"
        return None

    def _swap(self, old: LoadedPlugin | None, new: LoadedPlugin | None) -> None:
        """One registry change: the old version's functions out, the new one's in."""
        bot = self.bot
        names = [s.name for s in old.specs()] if old is not None else []
        specs = new.specs() if new is not None else []
        held = old is not None and bot.guard.is_off(old.name)
        bot.registry.replace(names, [] if held else specs)
        for group in {id(bot.plugins): bot.plugins, id(self._list()): self._list()}.values():
            if old is not None and old in group:
                index = group.index(old)
                group[index : index + 1] = [new] if new is not None else []
            elif new is not None:
                group.append(new)
        if new is not None:
            bot.guard.watch(new.name, specs)
            if new.plugin is not None and new.plugin.section is not None:
                section = new.plugin.section
                if new.plugin.settings is not None and section not in bot.settings.__dict__:
                    bot.settings.__dict__[section] = new.plugin.settings()


def _forget_modules(module: str) -> None:
    """Drop the package of `module` from the import cache, so it is imported anew."""
    top = module.split(".")[0]
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]
