"""The plugin market's index (`plugins.index_url`; its format: plugins/index.schema.json in the
repository), as `chatfn plugin install` and the console's market read it: when the index lists
the distribution and version being installed, the wheel's sha256 must be one the index lists,
or nothing is installed. A URL is read through chatfn.common.fetch (bounded; internal addresses
refused); a path (relative: to the config file's folder) is read from disk.

Unset, `plugins.index_url` is the project's own index as this chatfn ships it
(chatfn/templates/plugins/index.json, in a checkout a link to the repository's
plugins/index.json): read from the installed package, so the default works offline and the
command line and the console check hashes against the same index."""

from __future__ import annotations

import asyncio
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from packaging.utils import canonicalize_name

from chatfn.common.fetch import FetchAllow, FetchError, fetch

MAX_BYTES = 5_000_000
TIMEOUT = 30.0


class PluginIndexError(ValueError):
    """The index cannot be read, or is not an index."""


def own_index() -> Path:
    """The project's own index as the installed chatfn ships it (the default index)."""
    return Path(str(resources.files("chatfn").joinpath("templates", "plugins", "index.json")))


def index_in_use(index_url: str | None) -> str:
    """`plugins.index_url`, or the project's own index where it is unset."""
    return index_url or str(own_index())


def read_index(index_url: str, base_dir: Path, allow: FetchAllow | None = None) -> dict[str, Any]:
    """The index; `allow`: the addresses beyond the public internet it may be on
    (`bot.fetch`, as for every URL the bot fetches)."""
    if index_url.startswith(("http://", "https://")):
        try:
            got = asyncio.run(fetch(index_url, allow=allow, max_bytes=MAX_BYTES, timeout=TIMEOUT))
        except FetchError as exc:
            raise PluginIndexError(f"plugins.index_url {index_url}: {exc}") from None
        text = got.data.decode("utf-8", "replace")
    else:
        path = Path(index_url.removeprefix("file://")).expanduser()
        path = path if path.is_absolute() else base_dir / path
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PluginIndexError(f"plugins.index_url {index_url}: {exc.strerror}") from None
    try:
        index = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PluginIndexError(f"plugins.index_url {index_url}: not JSON ({exc})") from None
    if not isinstance(index, dict) or not isinstance(index.get("plugins"), list):
        raise PluginIndexError(
            f"plugins.index_url {index_url}: not a plugin index (no plugins list)"
        )
    problem = index_problem(index)
    if problem is not None:
        raise PluginIndexError(f"plugins.index_url {index_url}: {problem}")
    return index


@cache
def _validator() -> Draft202012Validator:
    schema_file = own_index().with_name("index.schema.json")
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def index_problem(index: Any) -> str | None:
    """What makes `index` no index by the format's JSON Schema (index.schema.json, shipped
    beside the default index), at the first place it goes wrong; None: it is one. Checked
    when the index is read, so nothing is installed from, or shown of, a broken one."""
    errors = sorted(_validator().iter_errors(index), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"not a valid plugin index at {where.lstrip('.') or 'the top'}: {first.message}{more}"


def listed_hashes(index: dict[str, Any], distribution: str, version: str) -> set[str] | None:
    """The sha256 digests the index lists for `distribution` `version` (None: not listed)."""
    wanted = canonicalize_name(distribution)
    found: set[str] | None = None
    for plugin in index.get("plugins", []):
        if not isinstance(plugin, dict) or plugin.get("kind") != "package":
            continue
        if canonicalize_name(str(plugin.get("distribution", ""))) != wanted:
            continue
        for entry in plugin.get("versions", []):
            if isinstance(entry, dict) and str(entry.get("version")) == version:
                found = found or set()
                found |= {str(f.get("sha256", "")) for f in entry.get("files", [])}
    return found


def file_plugin(index: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The index's one-file plugin (`kind: file`) named `name`, or None."""
    for plugin in index.get("plugins", []):
        if isinstance(plugin, dict) and plugin.get("kind") == "file" and plugin.get("name") == name:
            return plugin
    return None


def read_listed_file(
    index_url: str, base_dir: Path, url: str, allow: FetchAllow | None = None
) -> bytes:
    """The bytes of a file the index lists (`url`: relative to the index's own address)."""
    if index_url.startswith(("http://", "https://")):
        from urllib.parse import urljoin

        target = urljoin(index_url, url)
        if not target.startswith(("http://", "https://")):
            raise PluginIndexError(f"{index_url}: {url} is not an http(s) address")
        try:
            got = asyncio.run(fetch(target, allow=allow, max_bytes=MAX_BYTES, timeout=TIMEOUT))
        except FetchError as exc:
            raise PluginIndexError(f"{target}: {exc}") from None
        return got.data
    if "://" in url:
        raise PluginIndexError(f"{index_url}: {url}: a file index lists files beside it")
    index_path = Path(index_url.removeprefix("file://")).expanduser()
    index_path = index_path if index_path.is_absolute() else base_dir / index_path
    try:
        return (index_path.parent / url).read_bytes()
    except OSError as exc:
        raise PluginIndexError(f"{index_path.parent / url}: {exc.strerror}") from None
