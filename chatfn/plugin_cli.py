"""`chatfn plugin new NAME | list | install SPEC | upgrade NAME | remove NAME`: plugin packages
in the bot's environment, through pip (chatfn/plugin_pip.py), from `plugins.package_index`.

`install` and `upgrade` show what they would install (package, version, declared permissions,
the wheel's sha256, anything else pip would bring) and ask before installing (`--yes`: do not
ask); an install that would change chatfn's own version or a version an installed plugin pins
is refused, naming each change. A change takes effect when the bot next starts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from chatfn.common.config import ConfigError, PluginSettings

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
    from chatfn import plugin_pip

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
    from chatfn.plugin_pip import chatfn_range, declared
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
    from chatfn import plugin_pip

    settings, base = plugin_settings(args.config)
    options = plugin_pip.index_options(settings.package_index, base)
    spec = args.name if upgrade else args.spec
    with tempfile.TemporaryDirectory(prefix="chatfn-plugin-") as tmp:
        wheel = plugin_pip.read_wheel(plugin_pip.fetch_wheel(spec, options, Path(tmp)))
        if not wheel.plugins:
            raise ValueError(
                f"{wheel.name} {wheel.version} is not a chatfn plugin "
                f"(no {plugin_pip.GROUP!r} entry point); not installed"
            )
        have = plugin_pip.installed_versions().get(plugin_pip.canonicalize_name(wheel.name))
        if upgrade and have is None:
            raise ValueError(f"{spec} is not installed (chatfn plugin install {spec})")
        if have == wheel.version:
            print(f"{wheel.name} {wheel.version} is installed already")
            return 0
        listed = _index_line(wheel, settings.index_url, base)
        changes = plugin_pip.would_install(str(wheel.path), options, upgrade=True)
        refused = plugin_pip.changes_refused(changes, keep=wheel.name)
        if refused:
            print(
                f"chatfn: not installing {wheel.name} {wheel.version}: it would change",
                file=sys.stderr,
            )
            for line in refused:
                print(f"  {line}", file=sys.stderr)
            return 2
        others = [
            f"{n} {v}"
            for n, v in sorted(changes.items())
            if n != plugin_pip.canonicalize_name(wheel.name)
        ]
        lines = wheel.describe()
        lines.append(f"also installs: {', '.join(others) or 'nothing else'}")
        lines += [listed] if listed else []
        if have is not None:
            lines.insert(0, f"upgrade {wheel.name} {have} -> {wheel.version}")
        if not confirm(lines, "Install?", args.yes):
            print("not installed")
            return 1
        plugin_pip.pip("install", *options, "--upgrade", str(wheel.path))
    print(f"installed {wheel.name} {wheel.version}; it loads when the bot next starts")
    return 0


def _index_line(wheel: Any, index_url: str | None, base: Path) -> str | None:
    """What `plugins.index_url` says of the wheel: a hash it does not list for a version it
    lists is refused (ValueError); None without an index."""
    from chatfn.plugin_index import listed_hashes, read_index

    if not index_url:
        return None
    hashes = listed_hashes(read_index(index_url, base), wheel.name, wheel.version)
    if hashes is None:
        return f"index:       {wheel.name} {wheel.version} is not listed in {index_url}"
    if wheel.sha256 not in hashes:
        raise ValueError(
            f"not installing {wheel.name} {wheel.version}: its sha256 {wheel.sha256} is not "
            f"one plugins.index_url lists for it ({', '.join(sorted(hashes))})"
        )
    return f"index:       listed in {index_url}, sha256 matches"


def _upgrade(args: argparse.Namespace) -> int:
    return _install(args, upgrade=True)


def _remove(args: argparse.Namespace) -> int:
    from chatfn import plugin_pip
    from chatfn.runtime.plugin_registry import GROUP, installed_distributions

    plugin_settings(args.config)
    found = installed_distributions()
    wanted = plugin_pip.canonicalize_name(args.name)
    dist_name = next(
        (
            n
            for n, d in found.items()
            if plugin_pip.canonicalize_name(n) == wanted
            or any(p.group == GROUP and p.name == args.name for p in d.entry_points)
        ),
        None,
    )
    if dist_name is None:
        raise ValueError(f"no installed plugin package {args.name!r} (chatfn plugin list)")
    lines = [f"package: {dist_name} {found[dist_name].version}"]
    if not confirm(lines, "Uninstall?", args.yes):
        print("not removed")
        return 1
    plugin_pip.pip("uninstall", "--yes", dist_name)
    print(f"removed {dist_name}; the bot runs without it from its next start")
    return 0
