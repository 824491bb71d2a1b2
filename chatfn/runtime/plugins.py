"""Loading plugins: the built-ins (by module name) and the user's plugin files, each with what
its module-level `Plugin` declares. Built-ins and user plugins go through the same code, so a
user's plugin gets everything a built-in gets: a config section, hooks, a status line.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from chatfn.common.config import CoreSettings
from function_calls.builtins import BUILTIN_PLUGINS
from function_calls.plugin import Plugin, Status
from function_calls.registry import (
    SPEC_ATTR,
    PluginLoadError,
    import_plugin_file,
    plugin_files,
)
from function_calls.spec import FunctionSpec


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    """One imported plugin module and its declarations (`plugin` is None for a file that only
    defines functions)."""

    module: types.ModuleType
    origin: str  # the built-in's module name, or the plugin file's path
    plugin: Plugin[Any] | None
    builtin: bool

    @property
    def name(self) -> str:
        if self.plugin is not None:
            return self.plugin.name
        return Path(self.origin).stem if not self.builtin else self.origin.rsplit(".", 1)[-1]

    def specs(self) -> list[FunctionSpec]:
        found = (getattr(v, SPEC_ATTR, None) for v in vars(self.module).values())
        return [s for s in found if isinstance(s, FunctionSpec)]

    def runs(self, settings: CoreSettings) -> bool:
        """Whether the plugin's own status is "on": only then are its functions registered and
        its hooks run. (Functions listed in `function_calls.disabled` stay registered, so a
        slash command says they are disabled rather than unknown.)"""
        return self.plugin is None or self.plugin.state(settings).state == "on"

    def state(self, settings: CoreSettings) -> Status:
        """The status line check_system.py prints; a plugin whose functions are all listed in
        `function_calls.disabled` reads "off"."""
        status = self.plugin.state(settings) if self.plugin is not None else None
        if status is None:
            names = ", ".join(s.name for s in self.specs())
            status = Status("on", f"functions: {names}" if names else "no functions")
        listed = [s.name for s in self.specs()]
        disabled = settings.function_calls.disabled
        off = [n for n in listed if any(fnmatchcase(n, p) for p in disabled)]
        if status.state == "on" and listed and len(off) == len(listed):
            return Status("off", "listed in function_calls.disabled")
        return status


def _plugin_of(module: types.ModuleType, origin: str) -> Plugin[Any] | None:
    found = [v for v in vars(module).values() if isinstance(v, Plugin)]
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise PluginLoadError(f"plugin {origin} declares more than one Plugin ({names})")
    return found[0] if found else None


def load_builtins() -> list[LoadedPlugin]:
    loaded = []
    for name in BUILTIN_PLUGINS:
        module = importlib.import_module(name)
        loaded.append(LoadedPlugin(module, name, _plugin_of(module, name), builtin=True))
    return loaded


def load_plugin_files(paths: list[str], base_dir: Path) -> list[LoadedPlugin]:
    """Import the user's plugin files. The default `plugins` folder may be missing; a path the
    config names explicitly must exist."""
    wanted = [p for p in paths if p != "plugins" or (base_dir / p).exists()]
    loaded = []
    for file in plugin_files(list(wanted), base_dir):
        module = import_plugin_file(file)
        loaded.append(LoadedPlugin(module, str(file), _plugin_of(module, str(file)), False))
    return loaded


def check_function_names(plugins: list[LoadedPlugin]) -> None:
    """Two plugins (or a plugin and a built-in) declaring one function name is a load error in
    one line naming both places, found when the plugins load (bot and check_system alike)."""
    seen: dict[str, FunctionSpec] = {}
    for loaded in plugins:
        for spec in loaded.specs():
            first = seen.setdefault(spec.name, spec)
            if first is not spec and first.handler is not spec.handler:
                raise PluginLoadError(
                    f"duplicate function name {spec.name!r}: defined at {first.source} "
                    f"and again at {spec.source}"
                )


def check_sections(plugins: list[LoadedPlugin], reserved: set[str]) -> dict[str, LoadedPlugin]:
    """Section name -> the plugin declaring it; two plugins (or a plugin and the core) claiming
    one section is a load error naming both."""
    sections: dict[str, LoadedPlugin] = {}
    for loaded in plugins:
        plugin = loaded.plugin
        if plugin is None or plugin.settings is None or plugin.section is None:
            continue
        if plugin.section in reserved:
            raise PluginLoadError(
                f"plugin {loaded.origin}: section {plugin.section!r} is a core config section"
            )
        if plugin.section in sections:
            raise PluginLoadError(
                f"plugins {sections[plugin.section].origin} and {loaded.origin} both declare "
                f"the config section {plugin.section!r}"
            )
        sections[plugin.section] = loaded
    return sections


@dataclass(frozen=True, slots=True)
class PluginFolder:
    """One entry of `plugins.paths` and what it gave: for the start-up line and check_system."""

    path: Path
    exists: bool
    files: int  # plugin files there (*.py not starting with _; 1 for a single file)
    functions: int  # the functions those files declare

    def describe(self) -> str:
        if not self.exists:
            return f"{self.path} (missing)"
        return f"{self.path} ({self.files} plugin(s), {self.functions} function(s))"


def plugin_folders(
    paths: list[str], base_dir: Path, loaded: list[LoadedPlugin] | None
) -> list[PluginFolder]:
    """Each configured plugin path, whether it exists, and the plugins and functions that came
    from it (of `loaded`, the plugins the settings were validated with)."""
    files = [Path(p.origin) for p in loaded or [] if not p.builtin]
    specs = {Path(p.origin): len(p.specs()) for p in loaded or [] if not p.builtin}
    folders = []
    for raw in paths:
        path = Path(raw) if Path(raw).is_absolute() else base_dir / raw
        mine = [f for f in files if f == path or path in f.parents]
        folders.append(PluginFolder(path, path.exists(), len(mine), sum(specs[f] for f in mine)))
    return folders


def builtin_status(settings: CoreSettings) -> list[tuple[str, str, str]]:
    """(name, state, detail) of each built-in, for check_system.py and tests."""
    loaded = getattr(settings, "plugins_loaded", None) or load_builtins()
    rows = []
    for plugin in loaded:
        if plugin.builtin:
            status = plugin.state(settings)
            rows.append((plugin.name, status.state, status.detail))
    return rows
