"""What the Matrix channel keeps between runs: the sync position (`since`, the `next_batch`
of the last sync whose messages were all handled) and, for a password login, the access
token and device it got, so a restart neither logs in again (a new device each time would
lose the transaction-id scope that deduplicates sends) nor re-reads the rooms' history.

One JSON file per account under `store_path`, written atomically (a temporary file renamed
over it) and readable by its owner only (it may hold an access token). Writes run in a thread:
the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from loguru import logger

from chatfn.channels import kit

__all__ = ["SyncStore"]


class SyncStore:
    def __init__(self, folder: str | Path, user_id: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", user_id.lstrip("@"))
        self.path = Path(folder) / f"{safe}.json"
        self.data: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    def load(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            raw = {}
        except (OSError, ValueError) as exc:
            logger.warning("Matrix store {} not readable ({}): starting afresh", self.path, exc)
            raw = {}
        self.data = raw if isinstance(raw, dict) else {}
        return self.data

    @property
    def since(self) -> str | None:
        value = self.data.get("since")
        return value if isinstance(value, str) and value else None

    async def save(self, **values: Any) -> None:
        """Merge `values` into the file (None removes a key)."""
        async with self._lock:
            for key, value in values.items():
                if value is None:
                    self.data.pop(key, None)
                else:
                    self.data[key] = value
            await asyncio.to_thread(self._write, dict(self.data))

    def _write(self, data: dict[str, Any]) -> None:
        kit.write_private_json(self.path, data)
