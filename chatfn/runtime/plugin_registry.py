"""Finding installed plugin packages: the `chatfn.plugins` entry-point group, and what each
tells an operator (name, version, description, homepage, author, the chatfn versions it
supports, the permissions it asks for).

A plugin package declares itself in its pyproject.toml, as a channel does:

    [project.entry-points."chatfn.plugins"]
    weather = "chatfn_weather"            # a module holding a `Plugin("weather", ...)`

and, once installed (`chatfn plugin install`, or pip), is loaded at start beside the built-ins
and the files of `plugins.paths`. `plugins.enabled` / `plugins.disabled` (entry-point or
distribution names, globs) choose among the installed ones. A plugin whose chatfn range (its
`Plugin(chatfn=...)`, else its distribution's requirement on chatfn) excludes the running
version is not loaded: one log line naming it and the range, and the rest of the bot starts;
so is one that fails to import.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib.metadata import Distribution, EntryPoint, entry_points
from typing import Any

from loguru import logger
from packaging.requirements import InvalidRequirement, Requirement

from chatfn.runtime.plugins import LoadedPlugin, PluginMeta, declared_meta, meta_problem, plugin_of
from function_calls.plugin import Plugin
from function_calls.registry import Registry

GROUP = "chatfn.plugins"


def chatfn_requirement(dist: Distribution) -> str:
    """The specifier of `dist`'s requirement on chatfn ("" when it names none)."""
    for line in dist.requires or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "chatfn" and (req.marker is None or req.marker.evaluate()):
            return str(req.specifier)
    return ""


def _field(md: Any, key: str) -> str:
    """One metadata field ("" when absent)."""
    return str((md.get_all(key) or [""])[0] or "")


def dist_meta(name: str, dist: Distribution | None) -> PluginMeta:
    """What a distribution's metadata says of the plugin `name`."""
    if dist is None:
        return PluginMeta(name)
    md = dist.metadata
    homepage = _field(md, "Home-page") or ""
    for url in md.get_all("Project-URL") or []:
        label, _, link = url.partition(",")
        if not homepage or label.strip().lower() in ("homepage", "home"):
            homepage = link.strip()
    author = _field(md, "Author") or _field(md, "Author-email") or ""
    return PluginMeta(
        name,
        distribution=_field(md, "Name") or "",
        version=dist.version or "",
        description=_field(md, "Summary") or "",
        homepage=homepage,
        author=author,
        chatfn=chatfn_requirement(dist),
    )


def chosen(names: tuple[str, ...], enabled: list[str], disabled: list[str]) -> bool:
    """Whether `plugins.enabled` / `plugins.disabled` let a plugin known by `names` load."""

    def hit(patterns: list[str]) -> bool:
        return any(fnmatchcase(n.lower(), p.lower()) for n in names if n for p in patterns)

    return hit(enabled) and not hit(disabled)


@dataclass
class InstalledPlugins:
    """What the `chatfn.plugins` group gave: the plugins loaded, and the others with why they
    were not (switched off in config, another chatfn range, failed to import)."""

    loaded: list[LoadedPlugin] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _module_of(point: EntryPoint) -> tuple[types.ModuleType, Plugin[Any] | None]:
    # As a plugin file: its functions are collected apart (a duplicate inside names it), not
    # into the global registry, and stay on the functions for the bot's registry to include.
    with Registry().collecting():
        value = point.load()
    if isinstance(value, types.ModuleType):
        return value, plugin_of(value, point.value)
    if isinstance(value, Plugin):
        return sys.modules[point.module], value
    raise TypeError(f"{point.value} is {type(value).__name__}, not a module or a Plugin")


def _load_one(point: EntryPoint, taken: set[str]) -> LoadedPlugin:
    """Import one entry point's plugin; ValueError (why) when it is not to be loaded."""
    dist = getattr(point, "dist", None)
    base = dist_meta(point.name, dist)
    problem = meta_problem(base)  # before importing: code for another chatfn may not import
    if problem is not None:
        raise ValueError(problem)
    module, plugin = _module_of(point)
    if plugin is not None and plugin.name != point.name:
        raise ValueError(f"entry point {point.name!r} names a Plugin called {plugin.name!r}")
    if point.name in taken:
        raise ValueError(f"the name {point.name!r} is taken by another plugin")
    meta = declared_meta(base, plugin)
    problem = meta_problem(meta)
    if problem is not None:
        raise ValueError(problem)
    origin = f"{base.distribution or point.name} ({point.value})"
    return LoadedPlugin(module, origin, plugin, builtin=False, meta=meta)


def load_installed(
    enabled: list[str],
    disabled: list[str],
    taken: set[str] | None = None,
    extra: list[EntryPoint] | None = None,
) -> InstalledPlugins:
    """Load the installed plugins `enabled`/`disabled` choose; `taken`: names already used
    (the built-ins', the plugin files'); `extra`: entry points to add (tests). One that is not
    loaded is logged once, in one line naming it and why."""
    found = InstalledPlugins()
    names = set(taken or ())
    for point in [*entry_points(group=GROUP), *(extra or [])]:
        dist = getattr(point, "dist", None)
        dist_name = (_field(dist.metadata, "Name") or "") if dist is not None else ""
        if not chosen((point.name, dist_name), enabled, disabled):
            found.skipped[point.name] = "off (plugins.enabled / plugins.disabled)"
            continue
        try:
            loaded = _load_one(point, names)
        except ValueError as exc:
            found.skipped[point.name] = str(exc)
            logger.warning("plugin {} not loaded: {}", point.name, exc)
            continue
        except Exception as exc:  # an installed plugin that cannot import must not stop the bot
            found.skipped[point.name] = f"failed to import: {type(exc).__name__}: {exc}"
            logger.error("plugin {} not loaded: {}", point.name, found.skipped[point.name])
            continue
        names.add(loaded.name)
        found.loaded.append(loaded)
    return found


def installed_distributions() -> dict[str, Distribution]:
    """Each installed distribution declaring a `chatfn.plugins` entry point, by its name."""
    out: dict[str, Distribution] = {}
    for point in entry_points(group=GROUP):
        dist = getattr(point, "dist", None)
        if dist is not None:
            out.setdefault((_field(dist.metadata, "Name") or point.name), dist)
    return out
