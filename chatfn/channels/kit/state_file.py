"""A channel's small state between runs (a stream position, a session token a login gave) kept
as one JSON object: read at start (a file that cannot be read is logged and started afresh),
changed a few keys at a time, each change written whole and private (files.py) in a thread, so
the event loop never waits on the disk, one write at a time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from loguru import logger

from chatfn.channels.kit.files import write_private_json

__all__ = ["StateFile"]


class StateFile:
    """The JSON object at `path`; `label` names it in the log ("X store")."""

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        self.data: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    def load(self) -> dict[str, Any]:
        """The file's object (blocking: at start, or in a thread); {} when there is none."""
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            raw = {}
        except (OSError, ValueError) as exc:
            logger.warning("{} {} not readable ({}): starting afresh", self.label, self.path, exc)
            raw = {}
        self.data = raw if isinstance(raw, dict) else {}
        return self.data

    async def save(self, **values: Any) -> None:
        """Merge `values` into the file (None removes a key)."""
        async with self._lock:
            for key, value in values.items():
                if value is None:
                    self.data.pop(key, None)
                else:
                    self.data[key] = value
            await asyncio.to_thread(write_private_json, self.path, dict(self.data))
