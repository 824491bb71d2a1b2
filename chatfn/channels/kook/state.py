"""What the KOOK channel keeps between runs: the gateway session and the `sn` up to which
every event was stored, so that after a restart the session is resumed and KOOK sends again
what the last run read but had not stored (developer.kookapp.cn/doc/websocket: the `sn`
"需自行记录（可保存至文件，以实现代码升级重启后恢复会话）"). A session KOOK no longer has is
answered with RECONNECT and a new one is started.

One JSON file per bot under `channels.kook.state_path`, written atomically (a temporary file
renamed over it) in a thread, the newest position only.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from loguru import logger

from chatfn.channels import kit

__all__ = ["SessionStore"]


class SessionStore:
    def __init__(self, folder: str | Path, bot_id: str) -> None:
        safe = "".join(c if c.isalnum() else "_" for c in bot_id) or "bot"
        self.path = Path(folder) / f"{safe}.json"
        self._latest: tuple[str | None, int] | None = None
        self._writing: asyncio.Task[None] | None = None

    def load(self) -> tuple[str, int] | None:
        """(session id, acked sn) kept by the last run, or None."""
        try:
            raw: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("KOOK state {} not readable ({}): a new session", self.path, exc)
            return None
        session, sn = (raw.get("session_id"), raw.get("sn")) if isinstance(raw, dict) else (0, 0)
        if isinstance(session, str) and session and isinstance(sn, int) and sn >= 0:
            return session, sn
        return None

    def keep(self, session_id: str | None, sn: int) -> None:
        """Write (session id, sn) soon; only the newest is written."""
        self._latest = (session_id, sn)
        if self._writing is None or self._writing.done():
            self._writing = asyncio.get_running_loop().create_task(self._write_latest())

    async def flush(self) -> None:
        """Until what was kept is on disk."""
        while self._writing is not None and not self._writing.done():
            await asyncio.shield(self._writing)

    async def _write_latest(self) -> None:
        while self._latest is not None:
            (session, sn), self._latest = self._latest, None
            data = {"session_id": session, "sn": sn} if session else {}
            try:
                await asyncio.to_thread(self._write, data)
            except OSError as exc:
                logger.warning("KOOK state {} not written ({})", self.path, exc)

    def _write(self, data: dict[str, Any]) -> None:
        kit.write_private_json(self.path, data)
