"""What the console changes, written to `config.yaml` itself (issue 39): the file is read and
written with ruamel.yaml's round trip, so its comments, key order and quoting stay as the
operator wrote them. A change is a list of edits (a key path and its new value, or DELETE);
the whole new config is validated as `chatfn run` validates it (`parse_settings`) before
anything is written, the previous file is kept as `config.yaml.bak`, and the new one replaces it
atomically (a temporary file renamed over it).

A value written as `${VAR}` comes from the environment: it is shown as such and an edit of it,
or of a key under it, is refused (409) rather than replaced by a literal. So is a value the
command line gives (`chatfn run --port/--host/--channel`, `Console.command_line`): the file's
value is not what runs, so the console does not pretend to change it.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatfn.common.config import ConfigError
from chatfn.runtime.console.errors import ConsoleError

if TYPE_CHECKING:
    from chatfn.runtime.settings import Settings

DELETE = object()  # an edit's value: remove the key
ENV_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")
Path_ = tuple[str, ...]
Edit = tuple[Path_, Any]
_lock = threading.Lock()  # one writer at a time in this process


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments and order kept
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 100
    return yaml


def config_path(settings: Settings) -> Path:
    """The file the bot was started with; without one, config.yaml in its base folder (the
    console then creates it)."""
    return settings.config_file or Path(settings.base_dir) / "config.yaml"


def read(path: Path) -> Any:
    """The file as a round-trip mapping (an empty one when there is no file yet)."""
    from ruamel.yaml.comments import CommentedMap

    if not path.exists():
        return CommentedMap()
    doc = _yaml().load(path.read_text(encoding="utf-8"))
    if doc is None:
        return CommentedMap()
    if not isinstance(doc, dict):
        raise ConsoleError(409, f"{path}: the top level is not a mapping of sections")
    return doc


def plain(value: Any) -> Any:
    """A round-trip value as plain dicts, lists and scalars (what parse_settings reads)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if value is None:
        return None
    for kind in (bool, int, float):  # ruamel's scalars are subclasses of these
        if isinstance(value, kind):
            return kind(value)
    return str(value)


def env_paths(doc: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every key path whose value is (or holds) an environment reference `${VAR}`."""
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            yield from env_paths(value, (*prefix, str(key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from env_paths(value, (*prefix, str(i)))
    elif isinstance(doc, str) and ENV_REF.search(doc):
        yield prefix


def from_env(doc: Any, path: Path_) -> bool:
    """Whether `path`, a key above it or one below it comes from the environment."""
    for found in env_paths(doc):
        n = min(len(found), len(path))
        if found[:n] == path[:n]:
            return True
    return False


def _apply(doc: Any, path: Path_, value: Any) -> None:
    from ruamel.yaml.comments import CommentedMap

    node = doc
    for key in path[:-1]:
        child = node.get(key)
        if child is None:
            if value is DELETE:
                return
            child = node[key] = CommentedMap()
        if not isinstance(child, dict):
            raise ConsoleError(409, f"{'.'.join(path)}: {key} is not a section in the file")
        node = child
    last = path[-1]
    if value is DELETE:
        node.pop(last, None)
    elif isinstance(value, dict) and isinstance(node.get(last), dict):
        # A section edited as a whole: its keys updated in place (their comments kept), the
        # ones not given removed.
        old = node[last]
        for key in [k for k in old if k not in value]:
            del old[key]
        for key, item in value.items():
            _apply(old, (key,), item)
    else:
        node[last] = value


def validate(data: dict[str, Any], settings: Settings, base: Path) -> Settings:
    from chatfn.runtime.settings import parse_settings

    try:
        return parse_settings(data, base_dir=base, plugins=settings.plugins_loaded)
    except ConfigError as exc:
        raise ConsoleError(400, str(exc)) from None


def covers(path: Path_, fixed: Mapping[Path_, str]) -> str | None:
    """The command-line flag that gives `path` (or a key above or below it), if any."""
    for found, flag in fixed.items():
        n = min(len(found), len(path))
        if found[:n] == path[:n]:
            return flag
    return None


def change(
    settings: Settings, edits: Sequence[Edit], command_line: Mapping[Path_, str] | None = None
) -> Settings:
    """Apply `edits` to the config file: validated as a whole first (nothing is written when
    the result is not a valid config), the old file kept as config.yaml.bak. Returns the new
    settings (not yet in use: the caller applies what may change while running)."""
    path = config_path(settings)
    if settings.config_file is None and path.exists():
        raise ConsoleError(
            409, f"the bot was started without a config file, and {path} exists: start it with it"
        )
    with _lock:
        doc = read(path)
        for key_path, value in edits:
            if from_env(doc, key_path):
                raise ConsoleError(
                    409,
                    f"{'.'.join(key_path)} comes from an environment variable in {path.name}: "
                    "change it there",
                    ".".join(key_path),
                )
            flag = covers(key_path, command_line or {})
            if flag is not None:
                raise ConsoleError(
                    409,
                    f"{'.'.join(key_path)} is given on the command line ({flag}): change it there",
                    ".".join(key_path),
                )
            _apply(doc, key_path, value)
        new = validate(plain(doc), settings, path.parent)
        text = io.StringIO()
        _yaml().dump(doc, text)
        _write(path, text.getvalue())
    new._config_file = path.resolve()
    return new


def _write(path: Path, text: str) -> None:
    """The old file to `<name>.bak`, the new one written beside it and renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
