"""The plugin market's index (`plugins.index_url`; its format: plugins/index.schema.json in the
repository), as `chatfn plugin install` reads it: when the index lists the distribution and
version being installed, the wheel's sha256 must be one the index lists, or nothing is
installed. A URL is read through chatfn.common.fetch (bounded; internal addresses refused); a
path (relative: to the config file's folder) is read from disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from chatfn.common.fetch import FetchAllow, FetchError, fetch

MAX_BYTES = 5_000_000
TIMEOUT = 30.0


class PluginIndexError(ValueError):
    """The index cannot be read, or is not an index."""


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
    return index


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
