"""Installing a plugin package, one implementation for `chatfn plugin install | upgrade` and the
console's market: fetch the wheel (pip, `plugins.package_index`), read it without running it
(metadata, entry points, declared permissions, sha256), check its hash against
`plugins.index_url` (unset: the project's own index), ask pip what the install would change
and refuse what changes chatfn or a version an installed plugin pins; then the confirmation
both show (package, version, permissions, hash, what else comes); `apply` installs exactly
the wheel that was shown.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from chatfn.common.config import PluginSettings
from chatfn.common.fetch import FetchAllow
from chatfn.runtime import plugin_pip
from chatfn.runtime.plugin_index import (
    file_plugin,
    index_in_use,
    listed_hashes,
    read_index,
    read_listed_file,
)
from chatfn.runtime.plugin_pip import Wheel

# A plugin file's name as the index format has it (plugins/index.schema.json).
FILE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


class InstallRefused(ValueError):
    """pip would change what must not change; `changes` names each."""

    def __init__(self, wheel: Wheel, changes: list[str]) -> None:
        super().__init__(
            f"not installing {wheel.name} {wheel.version}: it would change " + "; ".join(changes)
        )
        self.wheel = wheel
        self.changes = changes


@dataclass
class InstallPlan:
    """One wheel fetched and checked, waiting for the operator's yes (`apply`) or no
    (`discard`)."""

    wheel: Wheel
    have: str | None  # the version installed now (None: not installed)
    options: list[str]  # pip's index options
    listed: str | None  # what the index says of it (None: not asked, nothing to install)
    others: list[str] = field(default_factory=list)  # what else pip would install
    installer: str = "auto"  # plugins.installer: what runs the install (plugin_pip.install)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def current(self) -> bool:
        """The version it names is the one installed: nothing to do."""
        return self.have == self.wheel.version

    def lines(self) -> list[str]:
        """The confirmation, as the command line prints it and the console shows it."""
        lines = self.wheel.describe()
        lines.append(f"also installs: {', '.join(self.others) or 'nothing else'}")
        lines += [self.listed] if self.listed else []
        if self.have is not None:
            lines.insert(0, f"upgrade {self.wheel.name} {self.have} -> {self.wheel.version}")
        return lines

    def apply(self) -> None:
        plugin_pip.install(self.installer, *self.options, "--upgrade", str(self.wheel.path))

    def discard(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def index_line(
    wheel: Wheel,
    index_url: str | None,
    base: Path,
    *,
    require_listed: bool = False,
    allow: FetchAllow | None = None,
) -> str:
    """What the index in use (`plugins.index_url`, unset: the project's own) says of the wheel:
    a hash it does not list for a version it lists is refused (ValueError), as is (with
    `require_listed`, the console's rule) a version it does not list."""
    url = index_in_use(index_url)
    hashes = listed_hashes(read_index(url, base, allow), wheel.name, wheel.version)
    if hashes is None:
        if require_listed:
            raise ValueError(f"not installing {wheel.name} {wheel.version}: {url} does not list it")
        return f"index:       {wheel.name} {wheel.version} is not listed in {url}"
    if wheel.sha256 not in hashes:
        raise ValueError(
            f"not installing {wheel.name} {wheel.version}: its sha256 {wheel.sha256} is not "
            f"one plugins.index_url lists for it ({', '.join(sorted(hashes))})"
        )
    return f"index:       listed in {url}, sha256 matches"


def plan(
    spec: str,
    settings: PluginSettings,
    base: Path,
    *,
    upgrade: bool = False,
    require_listed: bool = False,
    allow: FetchAllow | None = None,
) -> InstallPlan:
    """Fetch and check `spec` (a name, `name==version`, a file or folder): ValueError or
    PipFailed saying why it is not to be installed; InstallRefused for what pip would change.
    The plan holds the wheel until `apply` or `discard`."""
    options = plugin_pip.index_options(settings.package_index, base)
    tmp = tempfile.TemporaryDirectory(prefix="chatfn-plugin-")
    try:
        wheel = plugin_pip.read_wheel(plugin_pip.fetch_wheel(spec, options, Path(tmp.name)))
        if not wheel.plugins:
            raise ValueError(
                f"{wheel.name} {wheel.version} is not a chatfn plugin "
                f"(no {plugin_pip.GROUP!r} entry point); not installed"
            )
        name = plugin_pip.canonicalize_name(wheel.name)
        have = plugin_pip.installed_versions().get(name)
        if upgrade and have is None:
            raise ValueError(f"{spec} is not installed (chatfn plugin install {spec})")
        found = InstallPlan(wheel, have, options, None, installer=settings.installer, _tmp=tmp)
        if found.current:
            return found
        found.listed = index_line(
            wheel, settings.index_url, base, require_listed=require_listed, allow=allow
        )
        changes = plugin_pip.would_install(
            str(wheel.path), options, upgrade=True, installer=settings.installer
        )
        refused = plugin_pip.changes_refused(changes, keep=wheel.name)
        if refused:
            raise InstallRefused(wheel, refused)
        found.others = [f"{n} {v}" for n, v in sorted(changes.items()) if n != name]
        return found
    except BaseException:
        tmp.cleanup()
        raise


def uninstall(dist_name: str, installer: str = "auto") -> None:
    plugin_pip.uninstall(installer, dist_name)


def installed_plugin(name: str) -> tuple[str, str] | None:
    """(distribution, version) of the installed plugin package `name` (its distribution's or
    an entry point's name); None: no such package."""
    found = plugin_pip.installed_distributions()
    wanted = plugin_pip.canonicalize_name(name)
    for dist_name, dist in found.items():
        if plugin_pip.canonicalize_name(dist_name) == wanted or any(
            p.group == plugin_pip.GROUP and p.name == name for p in dist.entry_points
        ):
            return dist_name, dist.version
    return None


@dataclass
class FilePlan:
    """A one-file plugin the index lists (`kind: file`), read and its sha256 checked against
    the index, waiting for the yes: `apply` writes it as `<name>.py` into the first folder of
    `plugins.paths`, where the bot loads it (a file there that is no version the index lists
    is the operator's own and never overwritten)."""

    name: str
    version: str
    sha256: str
    data: bytes
    target: Path
    have: str | None  # the listed version the file there is (None: no file)
    permissions: list[str]
    chatfn: str
    listed: str
    others: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return self.have == self.version

    def lines(self) -> list[str]:
        lines = [
            f"plugin file: {self.name} {self.version} -> {self.target}",
            f"permissions: {', '.join(self.permissions) or 'none declared'}",
            f"chatfn:      {self.chatfn or 'any version'}",
            f"sha256:      {self.sha256}",
            self.listed,
        ]
        if self.have is not None:
            lines.insert(0, f"upgrade {self.name} {self.have} -> {self.version}")
        return lines

    def apply(self) -> None:
        if hashlib.sha256(self.data).hexdigest() != self.sha256:
            raise ValueError(f"{self.name}: the file changed since it was shown")
        self.target.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.target.with_name(f".{self.target.name}.part")
        tmp.write_bytes(self.data)
        os.replace(tmp, self.target)

    def discard(self) -> None:
        pass


def plugin_folder(settings: PluginSettings, base: Path) -> Path:
    """Where a plugin file is installed: the first folder `plugins.paths` names."""
    for entry in settings.paths:
        path = Path(entry).expanduser()
        path = path if path.is_absolute() else base / path
        if path.suffix != ".py":
            return path
    raise ValueError("plugins.paths names no folder: a plugin file has nowhere to go")


def plan_file(
    name: str,
    version: str | None,
    settings: PluginSettings,
    base: Path,
    *,
    allow: FetchAllow | None = None,
) -> FilePlan | None:
    """The plan for the index's one-file plugin `name` (None: the index has no such plugin);
    ValueError for what is not to be installed."""
    from chatfn.runtime.plugin_pip import declared
    from chatfn.runtime.plugins import supports_safely

    url = index_in_use(settings.index_url)
    entry = file_plugin(read_index(url, base, allow), name)
    if entry is None:
        return None
    versions = [v for v in entry.get("versions", []) if isinstance(v, dict)]
    chosen = [v for v in versions if version is None or str(v.get("version")) == version]
    if not chosen:
        raise ValueError(f"not installing {name} {version}: {url} does not list it")
    listed = chosen[-1]
    files = listed.get("files") or []
    filename = f"{name}.py"
    if len(files) != 1 or files[0].get("filename") != filename:
        raise ValueError(f"{url}: plugin file {name} must list one file, {filename}")
    data = read_listed_file(url, base, str(files[0].get("url") or filename), allow)
    digest = hashlib.sha256(data).hexdigest()
    if digest != files[0].get("sha256"):
        raise ValueError(
            f"not installing {name} {listed.get('version')}: its sha256 {digest} is not the "
            f"one plugins.index_url lists for it ({files[0].get('sha256')})"
        )
    permissions, declared_range = declared(data.decode("utf-8", "replace"))
    rng = str(listed.get("chatfn") or declared_range)
    if rng and not supports_safely(rng):
        raise ValueError(f"not installing {name}: it supports chatfn {rng}")
    target = plugin_folder(settings, base) / filename
    have = None
    if target.exists():
        there = hashlib.sha256(target.read_bytes()).hexdigest()
        known = {
            f.get("sha256"): str(v.get("version")) for v in versions for f in v.get("files") or []
        }
        if there not in known:
            raise ValueError(
                f"not installing {name}: {target} is a file of your own (no version "
                f"{url} lists); it is never overwritten"
            )
        have = known[there]
    line = f"index:       listed in {url}, sha256 matches"
    return FilePlan(
        name, str(listed.get("version")), digest, data, target, have, permissions, rng, line
    )


@dataclass(frozen=True)
class FileRemoval:
    """A one-file plugin the index lists, found in the plugins folder as one of its listed
    versions: `apply` deletes it. A file there that is no listed version (edited, or the
    operator's own under that name) is never deleted: `plan_file_removal` refuses it."""

    name: str
    version: str
    path: Path
    sha256: str

    def lines(self) -> list[str]:
        return [f"plugin file: {self.name} {self.version} at {self.path}", f"sha256: {self.sha256}"]

    def apply(self) -> None:
        if hashlib.sha256(self.path.read_bytes()).hexdigest() != self.sha256:
            raise ValueError(f"{self.path} changed since it was shown: not removed")
        self.path.unlink()


def plan_file_removal(
    name: str, settings: PluginSettings, base: Path, *, allow: FetchAllow | None = None
) -> FileRemoval | None:
    """The removal of the plugin file `name` (`<name>.py` in the first folder of
    `plugins.paths`, where `chatfn plugin install` writes it); None: no such file. ValueError
    when the file is not a version the index lists for `name`: what an operator wrote or
    changed is theirs to remove by hand."""
    if not FILE_NAME.fullmatch(name):
        return None
    path = plugin_folder(settings, base) / f"{name}.py"
    if not path.is_file():
        return None
    url = index_in_use(settings.index_url)
    there = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = file_plugin(read_index(url, base, allow), name)
    versions = [v for v in (entry or {}).get("versions", []) if isinstance(v, dict)]
    for version in versions:
        if any(f.get("sha256") == there for f in version.get("files") or []):
            return FileRemoval(name, str(version.get("version")), path, there)
    raise ValueError(
        f"not removing {path}: it is no version of {name} that {url} lists (a file of your "
        "own, or changed since it was installed); remove it by hand if you mean to"
    )
