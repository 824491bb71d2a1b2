"""Turns a crash cut short, handled at the next start of a single process.

A turn is recorded as finished in `handled_messages` (chatfn/storage/cluster.py) when it ends. At
start,
the user messages of the last `bot.resume_window` seconds that addressed the bot's chats, were
stored, and have neither that record nor any bot message after them in their chat are handled
again, once each, in chat order. A turn that already sent something is not run again (at most
once beats twice); a cluster needs none of this, its broker redelivers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy.engine import Row

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.storage.db import Storage

Handle = Callable[..., Awaitable[list[OutgoingMessage]]]
Finished = Callable[[IncomingMessage, int], Awaitable[None]]


def _incoming(row: Row[Any]) -> IncomingMessage:
    created = row.created_at
    return IncomingMessage(
        platform=row.platform,
        chat_id=row.chat_id,
        sender_id=row.sender_id,
        text=row.text,
        is_group=row.is_group,
        sender_name=row.sender_name,
        is_at_bot=bool(row.is_at_bot),
        message_id=row.message_id,
        time=created if created.tzinfo else created.replace(tzinfo=UTC),
    )


async def resume_turns(
    storage: Storage,
    window: float,
    handle: Handle,
    finished: Finished,
    tasks: set[asyncio.Task[Any]],
) -> int:
    """Start one task per chat running its cut turns in order (`handle(msg, stored_id=...)`,
    then `finished`); the tasks go in `tasks`. Returns how many turns are resumed."""
    if not window:
        return 0
    since = datetime.now(UTC) - timedelta(seconds=window)
    rows = await storage.run(storage.cluster.unfinished, since)
    if not rows:
        return 0
    chats: dict[tuple[str, str], list[Row[Any]]] = {}
    for row in rows:
        chats.setdefault((row.platform, row.chat_id), []).append(row)
    logger.warning(
        "resuming {} turn(s) cut short by the last stop, in {} chat(s)", len(rows), len(chats)
    )

    async def run_chat(chat_rows: list[Row[Any]]) -> None:
        for row in chat_rows:
            msg = _incoming(row)
            try:
                sent = await handle(msg, stored_id=row.id)
            except Exception as exc:
                logger.opt(exception=exc).error("resuming message {} failed", row.message_id)
                continue
            await finished(msg, len(sent))

    for chat_rows in chats.values():
        task = asyncio.create_task(run_chat(chat_rows))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    # Let each task queue on its chat's lock before any new message of that chat can.
    await asyncio.sleep(0)
    return len(rows)
