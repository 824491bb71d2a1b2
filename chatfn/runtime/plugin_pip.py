"""What `chatfn plugin install | upgrade | remove` ask pip, and what they read before asking it
to change anything: the wheel's metadata, its declared permissions (read from its source, never
run), its file hash, and pip's own account of what an install would change (`pip install
--dry-run --report`), refused when that changes chatfn's version or a version another installed
plugin pins.

Everything runs against the bot's environment (`sys.executable -m pip`), with
`plugins.package_index`: pip's index URL, or a folder of wheels (`--no-index --find-links`).
The install and the removal themselves run through `plugins.installer`: uv's pip interface
where uv is on PATH (`auto`, the default) or asked for, pip otherwise, and so does the dry
run whose changes are checked (the same resolver that installs); building the wheel stays
pip's (uv has no `pip wheel`). uv reads no pip configuration: `plugins.package_index` is
passed to both.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from chatfn.runtime.plugin_registry import GROUP, installed_distributions

#: Longest a pip run may take (an index that does not answer).
PIP_TIMEOUT = 600.0


class PipFailed(RuntimeError):
    """pip exited with an error; the message is its last lines."""


def index_options(package_index: str | None, base_dir: Path) -> list[str]:
    """pip's options for `plugins.package_index`: a URL is `--index-url`, a folder (relative:
    to the config file's) is `--no-index --find-links`, None is pip's own configuration."""
    if not package_index:
        return []
    if "://" in package_index and not package_index.startswith("file://"):
        return ["--index-url", package_index]
    folder = Path(package_index.removeprefix("file://")).expanduser()
    if not folder.is_absolute():
        folder = base_dir / folder
    return ["--no-index", "--find-links", str(folder)]


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]


def uv_path(installer: str) -> str | None:
    """uv's path when `plugins.installer` has it run installs (`auto`: where uv is on PATH)."""
    uv = shutil.which("uv") if installer in ("auto", "uv") else None
    if installer == "uv" and uv is None:
        raise PipFailed("plugins.installer is uv, but no uv is on PATH (pip install uv)")
    return uv


def install(installer: str, *args: str) -> str:
    """`pip install ARGS` (or `uv pip install --python THIS ARGS`) into the bot's environment."""
    return _run(installer, "install", *args)


def uninstall(installer: str, dist_name: str) -> str:
    """Remove `dist_name` from the bot's environment (pip with --yes; uv never asks)."""
    return _run(installer, "uninstall", dist_name)


def _run(installer: str, verb: str, *args: str) -> str:
    uv = uv_path(installer)
    if uv is not None:  # uv is told which environment; it finds none by itself here
        return _checked([uv, "pip", verb, "--python", sys.executable, *args], f"uv pip {verb}")
    yes = ["--yes"] if verb == "uninstall" else []
    return _checked([*PIP, verb, *yes, *args], f"pip {verb}")


def pip(*args: str) -> str:
    """Run pip in the bot's environment; its output, or PipFailed with its last lines."""
    return _checked([*PIP, *args], f"pip {args[0]}")


def _checked(cmd: list[str], what: str) -> str:
    return _completed(cmd, what).stdout


def _completed(cmd: list[str], what: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-6:]
        raise PipFailed(f"{what} failed: " + " / ".join(tail))
    return done


@dataclass
class Wheel:
    """One plugin wheel, read without running any of it."""

    path: Path
    name: str
    version: str
    sha256: str
    requires: list[str]
    plugins: dict[str, str]  # entry-point name -> target
    permissions: list[str] = field(default_factory=list)
    chatfn: str = ""
    summary: str = ""

    def describe(self) -> list[str]:
        return [
            f"package:     {self.name} {self.version} (plugin {', '.join(self.plugins)})",
            f"summary:     {self.summary or '-'}",
            f"permissions: {', '.join(self.permissions) or 'none declared'}",
            f"chatfn:      {self.chatfn or 'any version'}",
            f"file:        {self.path.name}",
            f"sha256:      {self.sha256}",
        ]


def fetch_wheel(spec: str, options: list[str], dest: Path) -> Path:
    """The wheel `spec` names (downloaded, or built from a source folder or sdist)."""
    before = set(dest.glob("*.whl"))
    pip("wheel", "--no-deps", "--wheel-dir", str(dest), *options, spec)
    made = sorted(set(dest.glob("*.whl")) - before) or sorted(dest.glob("*.whl"))
    if not made:
        raise PipFailed(f"pip wheel gave no wheel for {spec!r}")
    return made[-1]


def read_wheel(path: Path) -> Wheel:
    """Metadata, entry points, declared permissions and hash of a wheel file."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        info = next((n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA")), None)
        if info is None:
            raise ValueError(f"{path.name} is not a wheel (no .dist-info/METADATA)")
        md = Parser().parsestr(zf.read(f"{info}/METADATA").decode("utf-8"))
        points = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        points.optionxform = str  # type: ignore[assignment,method-assign]
        if f"{info}/entry_points.txt" in names:
            points.read_string(zf.read(f"{info}/entry_points.txt").decode("utf-8"))
        plugins = dict(points.items(GROUP)) if points.has_section(GROUP) else {}
        wheel = Wheel(
            path,
            md.get("Name", ""),
            md.get("Version", ""),
            digest,
            md.get_all("Requires-Dist") or [],
            {k: v.strip() for k, v in plugins.items()},
            summary=md.get("Summary", "") or "",
        )
        for target in wheel.plugins.values():
            source = _module_source(zf, names, target.partition(":")[0].strip())
            if source is not None:
                perms, rng = declared(source)
                wheel.permissions += [p for p in perms if p not in wheel.permissions]
                wheel.chatfn = wheel.chatfn or rng
    wheel.chatfn = wheel.chatfn or chatfn_range(wheel.requires)
    return wheel


def _module_source(zf: zipfile.ZipFile, names: list[str], module: str) -> str | None:
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in names:
            return zf.read(candidate).decode("utf-8", "replace")
    return None


def declared(source: str) -> tuple[list[str], str]:
    """(permissions, chatfn range) of the `Plugin(...)` call in `source`, read from its
    syntax tree (literals only), never by running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if called != "Plugin":
            continue
        found: dict[str, object] = {}
        for kw in node.keywords:
            if kw.arg in ("permissions", "chatfn"):
                try:
                    found[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    found[kw.arg] = "(not a literal)"
        perms = found.get("permissions", ())
        listed = [str(p) for p in perms] if isinstance(perms, list | tuple | set) else [str(perms)]
        return sorted(listed), str(found.get("chatfn", ""))
    return [], ""


def chatfn_range(requires: list[str]) -> str:
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "chatfn":
            return str(req.specifier)
    return ""


def would_install(
    target: str, options: list[str], upgrade: bool, installer: str = "pip"
) -> dict[str, str]:
    """What installing `target` would install (name -> version), asked of the installer that
    will install it (pip's `--report`, uv's `+ name==version` lines): the refusals are checked
    against what that resolver will do, not what another would."""
    flags = ["--upgrade"] if upgrade else []
    uv = uv_path(installer)
    if uv is not None:
        cmd = [uv, "pip", "install", "--dry-run", "--python", sys.executable, *options]
        done = _completed([*cmd, *flags, target], "uv pip install --dry-run")
        lines = (done.stdout + "\n" + done.stderr).splitlines()
        found = (_UV_PLUS.match(line) for line in lines)
        return {canonicalize_name(m[1]): m[2] for m in found if m}
    out = pip("install", "--dry-run", "--quiet", "--report", "-", *options, *flags, target)
    start = out.find("{")
    report = json.loads(out[start:]) if start >= 0 else {"install": []}
    return {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in report.get("install", [])
    }


_UV_PLUS = re.compile(r"^ \+ ([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def installed_versions() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"] or ""): d.version for d in distributions()}


def changes_refused(
    changes: dict[str, str], keep: str, plugins: dict[str, Distribution] | None = None
) -> list[str]:
    """Why installing `changes` (name -> version) is refused: it changes chatfn's version, or
    a version another installed plugin (not `keep`, the one being installed) pins."""
    have = installed_versions()
    refused = []
    new_chatfn = changes.get("chatfn")
    if new_chatfn is not None and new_chatfn != have.get("chatfn"):
        refused.append(f"chatfn {have.get('chatfn', 'not installed')} -> {new_chatfn}")
    found = plugins if plugins is not None else installed_distributions()
    for dist_name, dist in found.items():
        if canonicalize_name(dist_name) == canonicalize_name(keep):
            continue
        for line in dist.requires or []:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = canonicalize_name(req.name)
            new = changes.get(name)
            if new is not None and not req.specifier.contains(new, prereleases=True):
                refused.append(
                    f"{req.name} {have.get(name, 'not installed')} -> {new}, "
                    f"but {dist_name} needs {req.name}{req.specifier}"
                )
    return refused
