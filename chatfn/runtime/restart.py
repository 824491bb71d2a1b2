"""A restart asked for from the console (its Restart button, `POST /admin/api/restart`), for
what takes effect only at start: a channel's settings, a plugin that cannot reload.

The process stops as it does on SIGTERM (turns in flight finish, channels close, the web server
drains, the database lock is released), then runs the same command line again in place
(`os.execv`): the same PID, so a container, a systemd unit or a terminal keeps watching one
process, and nothing outside it has to restart it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import NoReturn

from loguru import logger


class RestartRequest:
    """Set once by the console; `chatfn run` waits on it beside SIGINT and SIGTERM."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.by: str | None = None
        # Set by `chatfn run`, which acts on a request; a bot embedded elsewhere refuses one.
        self.armed = False

    def request(self, by: str) -> None:
        if not self.requested.is_set():
            self.by = by
            self.requested.set()

    @property
    def pending(self) -> bool:
        return self.requested.is_set()


def exec_again() -> NoReturn:
    """Run this process's command line again, interpreter flags included (`sys.orig_argv`)."""
    argv = list(sys.orig_argv)
    logger.info("chatfn restarting: {}", " ".join(argv))
    logger.complete()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
