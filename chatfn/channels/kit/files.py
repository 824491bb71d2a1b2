"""A channel's own state file (a session to resume, a sync token): written so that a crash
or a full disk mid-write never leaves it half written, and readable by the bot's user only
(it may hold what lets someone else resume the bot's session)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["write_private_json"]


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """`data` as JSON at `path`, mode 0600: written to a temporary file beside it, flushed to
    disk and renamed over it (blocking: call it in a thread)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
