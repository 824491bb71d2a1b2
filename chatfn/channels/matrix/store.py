"""What the Matrix channel keeps between runs: the sync position (`since`, the `next_batch`
of the last sync whose messages were all handled) and, for a password login, the access
token and device it got, so a restart neither logs in again (a new device each time would
lose the transaction-id scope that deduplicates sends) nor re-reads the rooms' history.

One JSON file per account under `store_path`, kept by the kit's StateFile (written whole,
readable by its owner only: it may hold an access token).
"""

from __future__ import annotations

import re
from pathlib import Path

from chatfn.channels.kit.state_file import StateFile

__all__ = ["SyncStore"]


class SyncStore(StateFile):
    def __init__(self, folder: str | Path, user_id: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", user_id.lstrip("@"))
        super().__init__(Path(folder) / f"{safe}.json", "Matrix store")

    @property
    def since(self) -> str | None:
        value = self.data.get("since")
        return value if isinstance(value, str) and value else None
