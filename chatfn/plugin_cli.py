"""`chatfn plugin new NAME | list | install SPEC | upgrade NAME | remove NAME`: plugin packages
in the bot's environment, through pip (chatfn/runtime/plugin_install.py,
plugin_pip.py: the console's market installs with the same code), from `plugins.package_index`.

`install` and `upgrade` show what they would install (package, version, declared permissions,
the wheel's sha256, anything else pip would bring) and ask before installing (`--yes`: do not
ask); an install that would change chatfn's own version or a version an installed plugin pins
is refused, naming each change. A one-file plugin the index lists (`kind: file`, the project's
own example among them: `chatfn plugin install example`) is written into the first folder of
`plugins.paths` after the same check of its sha256 and the same question. A change takes effect
when the bot next starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from chatfn.common.config import ConfigError, PluginSettings
from chatfn.plugin_new import NAME

if TYPE_CHECKING:
    from chatfn.runtime.plugin_install import FilePlan

DESCRIPTION = "Plugin packages: new NAME, list, install SPEC, upgrade NAME, remove NAME."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="plugin_command", metavar="COMMAND", required=True)
    new = sub.add_parser("new", help="Write a plugin package skeleton chatfn-NAME/.")
    new.add_argument("name", metavar="NAME")
    new.add_argument("--dir", default=".", help="where to write it (default: here)")
    listing = sub.add_parser("list", help="The installed plugin packages.")
    install = sub.add_parser("install", help="Install a plugin package (name, file or folder).")
    install.add_argument("spec", metavar="SPEC")
    upgrade = sub.add_parser("upgrade", help="Upgrade an installed plugin package.")
    upgrade.add_argument("name", metavar="NAME")
    remove = sub.add_parser("remove", help="Uninstall a plugin package.")
    remove.add_argument("name", metavar="NAME")
    for command in (listing, install, upgrade, remove):
        command.add_argument("--config", help="config file (default: ./config.yaml if present)")
    for command in (install, upgrade, remove):
        command.add_argument("--yes", "-y", action="store_true", help="do not ask")


def plugin_settings(path: str | None) -> tuple[PluginSettings, Path]:
    """The `plugins:` section of the config file (validated as the bot validates it) and the
    folder its relative paths are taken from."""
    file = Path(path) if path else Path("config.yaml")
    if path is None and not file.exists():
        return PluginSettings(), Path.cwd()
    if not file.exists():
        raise ConfigError(f"config file {file} does not exist")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file} is not valid YAML: {exc}") from None
    section = data.get("plugins") if isinstance(data, dict) else None
    try:
        settings = PluginSettings.model_validate(section or {})
    except ValueError as exc:
        first = str(exc).splitlines()
        raise ConfigError(f"plugins: {' '.join(first[1:3]) or first[0]}") from None
    return settings, file.resolve().parent


def confirm(lines: list[str], question: str, yes: bool) -> bool:
    print("\n".join(lines))
    if yes:
        return True
    print(f"{question} [y/N] ", end="", flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def command(args: argparse.Namespace) -> int:
    from chatfn.runtime import plugin_pip

    handlers = {
        "new": _new,
        "list": _list,
        "install": _install,
        "upgrade": _upgrade,
        "remove": _remove,
    }
    try:
        return handlers[args.plugin_command](args)
    except (plugin_pip.PipFailed, ValueError) as exc:
        print(f"chatfn: {exc}", file=sys.stderr)
        return 2


def _new(args: argparse.Namespace) -> int:
    from chatfn.plugin_new import write_skeleton

    root = write_skeleton(args.name, Path(args.dir))
    print(f"wrote {root}: pyproject.toml, {root.name.replace('-', '_')}/, tests/, README.md")
    print(f'next: cd {root} && pip install -e ".[test]" && python -m pytest')
    return 0


def _list(args: argparse.Namespace) -> int:
    from chatfn.runtime.plugin_pip import chatfn_range, declared
    from chatfn.runtime.plugin_registry import GROUP, chosen, installed_distributions
    from chatfn.runtime.plugins import supports_safely

    settings, _ = plugin_settings(args.config)
    found = installed_distributions()
    if not found:
        print("no plugin package installed (chatfn plugin install SPEC)")
    for name, dist in sorted(found.items()):
        points = [p for p in dist.entry_points if p.group == GROUP]
        rng = chatfn_range(list(dist.requires or []))
        perms: list[str] = []
        for point in points:
            source = _installed_source(dist, point.module)
            if source is not None:
                got, declared_range = declared(source)
                perms += got
                rng = declared_range or rng
        on = all(chosen((p.name, name), settings.enabled, settings.disabled) for p in points)
        state = "on" if on else "off (plugins.disabled)"
        if rng and not supports_safely(rng):
            state = f"not loaded: it supports chatfn {rng}"
        names = ", ".join(p.name for p in points)
        print(
            f"{name} {dist.version}  plugin {names}  {state}  chatfn {rng or 'any'}  "
            f"permissions: {', '.join(perms) or 'none'}"
        )
    return 0


def _installed_source(dist: object, module: str) -> str | None:
    base = module.replace(".", "/")
    for file in getattr(dist, "files", None) or []:
        if str(file) in (f"{base}.py", f"{base}/__init__.py"):
            try:
                return Path(str(file.locate())).read_text(encoding="utf-8")
            except OSError:
                return None
    return None


def _install(args: argparse.Namespace, *, upgrade: bool = False) -> int:
    from chatfn.runtime.plugin_install import InstallRefused, plan

    settings, base = plugin_settings(args.config)
    spec = args.name if upgrade else args.spec
    name, _, version = spec.partition("==")
    if NAME.match(name) and not Path(spec).exists():  # a plugin file the index lists?
        from chatfn.runtime.plugin_install import plan_file

        filed = plan_file(name, version or None, settings, base)
        if filed is not None:
            return _install_file(filed, args.yes)
    try:
        found = plan(spec, settings, base, upgrade=upgrade)
    except InstallRefused as exc:
        wheel = exc.wheel
        print(
            f"chatfn: not installing {wheel.name} {wheel.version}: it would change",
            file=sys.stderr,
        )
        for line in exc.changes:
            print(f"  {line}", file=sys.stderr)
        return 2
    wheel = found.wheel
    try:
        if found.current:
            print(f"{wheel.name} {wheel.version} is installed already")
            return 0
        if not confirm(found.lines(), "Install?", args.yes):
            print("not installed")
            return 1
        found.apply()
    finally:
        found.discard()
    print(f"installed {wheel.name} {wheel.version}; it loads when the bot next starts")
    return 0


def _install_file(found: FilePlan, yes: bool) -> int:
    """A one-file plugin the index lists: written into the plugins folder after the yes."""
    if found.current:
        print(f"{found.name} {found.version} is installed already ({found.target})")
        return 0
    if not confirm(found.lines(), "Install?", yes):
        print("not installed")
        return 1
    found.apply()
    print(f"installed {found.target}; it loads when the bot next starts")
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    return _install(args, upgrade=True)


def _remove(args: argparse.Namespace) -> int:
    from chatfn.runtime.plugin_install import installed_plugin, plan_file_removal, uninstall

    settings, base = plugin_settings(args.config)
    found = installed_plugin(args.name)
    if found is None:
        filed = plan_file_removal(args.name, settings, base)
        if filed is None:
            raise ValueError(
                f"no installed plugin package {args.name!r}, nor a plugin file {args.name}.py "
                "(chatfn plugin list)"
            )
        if not confirm(filed.lines(), "Remove?", args.yes):
            print("not removed")
            return 1
        filed.apply()
        print(f"removed {filed.path}; the bot runs without it from its next start")
        return 0
    dist_name, version = found
    if not confirm([f"package: {dist_name} {version}"], "Uninstall?", args.yes):
        print("not removed")
        return 1
    uninstall(dist_name, settings.installer)
    print(f"removed {dist_name}; the bot runs without it from its next start")
    return 0
