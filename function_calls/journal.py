"""What a turn has to write, gathered so that it goes to the database in the writes the turn
makes anyway: one transaction per tool round (with the tool-call audit row) and one at its end,
not one per model request, usage row or limit count (bench/README.md, "Two commits a
message").

`TurnJournal` collects the usage rows of the turn's model requests and the limit counters
they add (`limits.count_request`), and `write()` puts them, with the audit row of a call,
into one `Storage.write_turn` transaction through `Storage.run` (off the event loop). The
runtime's subclass (chatfn/runtime/turn_writer.py) adds the turn's outgoing messages, the delivery
marks waiting to be written and the turn's handled mark.

What a crash between a model request and the turn's next write loses: that request's usage
row and its token/call counts (the user's message and everything the turn sent before are
stored). Limits stay exact where they decide: a message and its first model call are counted
in the transaction that stores the message, before any model is called.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from loguru import logger

from chatfn.storage.db import StorageError, TurnWrite

if TYPE_CHECKING:
    from chatfn.storage.chat_state import Counter
    from chatfn.storage.db import Storage


class TurnJournal:
    """The unwritten part of one turn (one chat), written by `write()` in one transaction."""

    def __init__(self, storage: Storage, platform: str, chat_id: str) -> None:
        self.storage = storage
        self.platform = platform
        self.chat_id = chat_id
        self.usage: list[dict[str, Any]] = []
        self.counts: list[tuple[Counter, int]] = []
        # One write at a time: a timer's write and the turn's own never interleave.
        self._lock = asyncio.Lock()

    def add_usage(self, rows: list[dict[str, Any]]) -> None:
        self.usage.extend(rows)

    def add_counts(self, counts: list[tuple[Counter, int]]) -> None:
        self.counts.extend((c, n) for c, n in counts if n)

    async def write(
        self,
        tool_call: dict[str, Any] | None = None,
        handled: tuple[str, str, int] | None = None,
        fate: dict[str, Any] | None = None,
    ) -> None:
        """Write what is waiting (and `tool_call`, an audit row; `handled`, the turn's end
        mark; `fate`, the message's fate: chatfn/storage/fates.py) in one transaction. Raises
        StorageError when the database refused it (the usage rows and counts are then lost,
        and logged)."""
        async with self._lock:
            batch = TurnWrite(self.platform, self.chat_id, usage=self.usage, counts=self.counts)
            self.usage, self.counts = [], []
            if tool_call is not None:
                batch.tool_calls.append(tool_call)
            batch.handled = handled
            batch.fate = fate
            self._collect(batch)
            if not batch:
                return
            try:
                ids = await self.storage.run(self.storage.write_turn, batch)
            except StorageError as exc:
                if batch.usage or batch.counts:
                    logger.error(
                        "{} usage row(s) and {} limit count(s) not written: {}",
                        len(batch.usage),
                        len(batch.counts),
                        exc,
                    )
                await self._written(batch, None)
                raise
            await self._written(batch, ids)

    def _collect(self, batch: TurnWrite) -> None:
        """Add what a subclass holds to `batch` (runtime: messages out, delivery marks)."""

    async def _written(self, batch: TurnWrite, ids: list[tuple[int, str]] | None) -> None:
        """After the transaction (`ids`: event id and state of each message out; None when it
        failed)."""
