"""The console's live log tail (`GET /admin/api/logs`, Server-Sent Events): a loguru sink that
exists only while a page watches, at the configured `logging.level` or above (so watching
turns on no line the log would not write anyway), every configured secret masked as in the
log file. Each watcher has a bounded queue: a slow page loses lines, never slows the bot.

While the console runs (`keep`, from `Console.start`), the last `BACKLOG` lines are kept too, so
the Logs page opens with them (each filtered as the page asks) rather than empty."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass
from datetime import UTC
from fnmatch import fnmatchcase
from typing import Any

from loguru import logger

from chatfn.runtime.logging import mask_text
from chatfn.storage.console.scope import Scope

LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
QUEUE = 1000
BACKLOG = 200  # lines the Logs page opens with


@dataclass(eq=False)
class Watcher:
    queue: asyncio.Queue[dict[str, Any]]
    level: int
    chat: str | None
    scope: Scope
    dropped: int = 0

    def wants(self, line: dict[str, Any], number: int) -> bool:
        if number < self.level:
            return False
        chat_id = line["chat_id"]
        if self.chat is not None and chat_id != self.chat:
            return False
        if self.scope.patterns is not None:
            # Log lines carry the chat id only: a scoped user sees lines of a chat id one of
            # their patterns names.
            chats = [p.partition(":")[2] or p for p in self.scope.patterns]
            return chat_id not in ("", "-") and any(fnmatchcase(chat_id, c) for c in chats)
        return True


class LogTail:
    def __init__(self, level: str) -> None:
        self.level = level  # logging.level: the least a watcher gets
        self._watchers: set[Watcher] = set()
        self._sink: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kept: deque[tuple[dict[str, Any], int]] = deque(maxlen=BACKLOG)
        self._keeping = False

    def keep(self) -> None:
        """Keep the last lines from now on (the sink stays while the console runs)."""
        self._keeping = True
        self._add_sink()

    def stop(self) -> None:
        self._keeping = False
        if not self._watchers:
            self._remove_sink()

    def _add_sink(self) -> None:
        if self._sink is None:
            self._loop = asyncio.get_running_loop()
            self._sink = logger.add(self._write, level=self.level, format="{message}", catch=True)

    def _remove_sink(self) -> None:
        if self._sink is not None:
            with contextlib.suppress(ValueError):
                logger.remove(self._sink)
            self._sink = None

    def watch(self, level: str, chat: str | None, scope: Scope) -> Watcher:
        least = max(LEVELS.index(level), LEVELS.index(self.level))
        watcher = Watcher(asyncio.Queue(QUEUE), logger.level(LEVELS[least]).no, chat, scope)
        for line, number in self._kept:  # the backlog first, filtered as this page asks
            if watcher.wants(line, number) and not watcher.queue.full():
                watcher.queue.put_nowait(line)
        self._watchers.add(watcher)
        self._add_sink()
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        if not self._watchers and not self._keeping:
            self._remove_sink()

    def _write(self, message: Any) -> None:
        """The sink: any thread may log; lines reach the watchers on the loop's thread."""
        record = message.record
        extra = record["extra"]
        line = {
            "time": record["time"]
            .astimezone(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record["level"].name,
            "chat_id": str(extra.get("chat_id", "-")),
            "message_id": str(extra.get("message_id", "-")),
            "logger": extra.get("logger_name") or record["name"] or "",
            "text": mask_text(str(record["message"])),
        }
        number = record["level"].no
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._deliver(line, number)
        else:
            loop.call_soon_threadsafe(self._deliver, line, number)

    def _deliver(self, line: dict[str, Any], number: int) -> None:
        if self._keeping:
            self._kept.append((line, number))
        for w in list(self._watchers):
            if w.wants(line, number):
                try:
                    w.queue.put_nowait(line)
                except asyncio.QueueFull:
                    w.dropped += 1
