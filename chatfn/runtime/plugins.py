"""Loading plugins: the built-ins (by module name) and the user's plugin files, each with what
its module-level `Plugin` declares. Built-ins and user plugins go through the same code, so a
user's plugin gets everything a built-in gets: a config section, hooks, a status line.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from loguru import logger
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from chatfn.common.config import CoreSettings
from chatfn.common.version import __version__
from function_calls.plugin import PERMISSIONS, Plugin, Status
from function_calls.registry import (
    SPEC_ATTR,
    PluginLoadError,
    import_plugin_file,
    plugin_files,
)
from function_calls.spec import FunctionSpec


@dataclass(frozen=True, slots=True)
class PluginMeta:
    """What an operator is told of a plugin: its distribution's metadata, with what its
    `Plugin(...)` declares over it (`chatfn check`, `chatfn plugin list`)."""

    name: str
    distribution: str = ""
    version: str = ""
    description: str = ""
    homepage: str = ""
    author: str = ""
    chatfn: str = ""  # the chatfn versions it supports, a specifier ("": any)
    permissions: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{self.distribution or self.name} {self.version}".strip()]
        if self.description:
            parts.append(self.description)
        parts.append(f"chatfn {self.chatfn or 'any'}")
        parts.append("permissions: " + (", ".join(self.permissions) or "none"))
        if self.author:
            parts.append(f"by {self.author}")
        if self.homepage:
            parts.append(self.homepage)
        return "; ".join(parts)


def supports(spec: str, version: str = __version__) -> bool:
    """Whether the chatfn range `spec` holds `version` (an empty range holds every one)."""
    return not spec or SpecifierSet(spec).contains(version, prereleases=True)


def declared_meta(base: PluginMeta, plugin: Plugin[Any] | None) -> PluginMeta:
    """`base` (a distribution's metadata) with what `plugin` declares itself filled over it."""
    if plugin is None:
        return base
    return replace(
        base,
        description=plugin.description or base.description,
        version=plugin.version or base.version,
        homepage=plugin.homepage or base.homepage,
        author=plugin.author or base.author,
        chatfn=plugin.chatfn or base.chatfn,
        permissions=tuple(plugin.permissions) or base.permissions,
    )


def meta_problem(meta: PluginMeta) -> str | None:
    """Why `meta` cannot be loaded (a range that excludes this chatfn, a bad range, an
    unknown permission); None: it can."""
    try:
        fits = supports(meta.chatfn)
    except InvalidSpecifier:
        return f"its chatfn range {meta.chatfn!r} is not a version specifier"
    if not fits:
        return f"it supports chatfn {meta.chatfn}, this is chatfn {__version__}"
    unknown = [p for p in meta.permissions if p not in PERMISSIONS]
    if unknown:
        return f"unknown permission(s) {', '.join(unknown)} (known: {', '.join(PERMISSIONS)})"
    return None


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    """One imported plugin module and its declarations (`plugin` is None for a file that only
    defines functions)."""

    module: types.ModuleType
    origin: str  # the built-in's module name, or the plugin file's path
    plugin: Plugin[Any] | None
    builtin: bool
    # Set for an installed package (chatfn/runtime/plugin_registry.py) and a plugin file.
    meta: PluginMeta | None = None
    # A built-in that is never switched off (`REQUIRED_BUILTINS`: the core's replies point to it).
    required: bool = False

    @property
    def installed(self) -> bool:
        """Whether it came from an installed package's `chatfn.plugins` entry point."""
        return self.meta is not None and bool(self.meta.distribution)

    @property
    def name(self) -> str:
        if self.plugin is not None:
            return self.plugin.name
        return Path(self.origin).stem if not self.builtin else self.origin.rsplit(".", 1)[-1]

    def specs(self) -> list[FunctionSpec]:
        found = (getattr(v, SPEC_ATTR, None) for v in vars(self.module).values())
        return [s for s in found if isinstance(s, FunctionSpec)]

    def switched_off(self, settings: CoreSettings) -> bool:
        """A built-in or a plugin file named (or globbed) in `plugins.disabled`, as an
        installed package is (that one is not even imported: chatfn/runtime/plugin_registry.py);
        a required built-in never is. A file is known by its plugin's name and by its file
        name without `.py`. Both are imported all the same: their config sections stay valid,
        and the console can switch them on."""
        if self.installed or self.required:
            return False
        names = {self.name.lower()}
        if not self.builtin:
            names.add(Path(self.origin).stem.lower())
        return any(fnmatchcase(n, p.lower()) for n in names for p in settings.plugins.disabled)

    def runs(self, settings: CoreSettings) -> bool:
        """Whether the plugin's own status is "on" (and `plugins.disabled` does not name it):
        only then are its functions registered, its tables made and its hooks run. (Functions
        listed in `function_calls.disabled` stay registered, so a slash command says they are
        disabled rather than unknown.)"""
        if self.switched_off(settings):
            return False
        return self.plugin is None or self.plugin.state(settings).state == "on"

    def state(self, settings: CoreSettings) -> Status:
        """The status line check_system.py prints; a plugin whose functions are all listed in
        `function_calls.disabled` reads "off"."""
        if self.switched_off(settings):
            return Status("off", "listed in plugins.disabled")
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


def plugin_of(module: types.ModuleType, origin: str) -> Plugin[Any] | None:
    found = [v for v in vars(module).values() if isinstance(v, Plugin)]
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise PluginLoadError(f"plugin {origin} declares more than one Plugin ({names})")
    return found[0] if found else None


#: Where the built-ins are: a package whose `BUILTIN_PLUGINS` names them in load order. It
#: is imported by name, as plugin files are by path: no module of the core imports a built-in
#: (tests/test_layers.py), which use the plugin API's doors only.
BUILTINS_PACKAGE = "function_calls.builtins"


def load_builtins() -> list[LoadedPlugin]:
    package = importlib.import_module(BUILTINS_PACKAGE)
    required = set(getattr(package, "REQUIRED_BUILTINS", ()))
    loaded = []
    for name in package.BUILTIN_PLUGINS:
        module = importlib.import_module(name)
        plugin = plugin_of(module, name)
        loaded.append(LoadedPlugin(module, name, plugin, builtin=True, required=name in required))
    return loaded


def check_disabled(plugins: list[LoadedPlugin], disabled: list[str]) -> str | None:
    """Why `plugins.disabled` cannot be (it names a required built-in); None: it can."""
    for loaded in plugins:
        if loaded.required and loaded.name.lower() in {p.lower() for p in disabled}:
            return (
                f"plugins.disabled: {loaded.name} is a required built-in and is always on "
                "(the bot's own replies point to it)"
            )
    return None


def load_plugin_files(paths: list[str], base_dir: Path) -> list[LoadedPlugin]:
    """Import the user's plugin files. The default `plugins` folder may be missing; a path the
    config names explicitly must exist."""
    wanted = [p for p in paths if p != "plugins" or (base_dir / p).exists()]
    loaded = []
    for file in plugin_files(list(wanted), base_dir):
        module = import_plugin_file(file)
        plugin = plugin_of(module, str(file))
        meta = declared_meta(PluginMeta(plugin.name if plugin else file.stem), plugin)
        problem = meta_problem(meta)
        if problem is not None and meta.chatfn and not supports_safely(meta.chatfn):
            logger.warning("plugin {} not loaded: {}", file, problem)
            continue
        if problem is not None:
            raise PluginLoadError(f"plugin {file}: {problem}")
        loaded.append(LoadedPlugin(module, str(file), plugin, False, meta=meta))
    return loaded


def supports_safely(spec: str) -> bool:
    """`supports`, with a malformed range counted as holding this version (reported apart)."""
    try:
        return supports(spec)
    except InvalidSpecifier:
        return True


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
    files = [Path(p.origin) for p in loaded or [] if not p.builtin and not p.installed]
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
