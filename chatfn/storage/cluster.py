"""Tables that let several processes share one database: finished turns by platform message
id (idempotent redelivery) and the live workers (partition balance). Synchronous, short."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from chatfn.storage.inserts import conflict_insert
from chatfn.storage.models import (
    handled_messages_table,
    messages_table,
    outbox_table,
    workers_table,
)
from chatfn.storage.outbox import OutboxEntry, _entry
from chatfn.storage.prepared import Prepared


@functools.cache
def _handled_insert(dialect: str) -> Prepared | None:
    """INSERT .. ON CONFLICT DO NOTHING into handled_messages, built once per dialect."""
    insert = conflict_insert(dialect)
    if insert is None:
        return None
    return Prepared(
        insert(handled_messages_table).on_conflict_do_nothing(
            index_elements=["platform", "chat_id", "message_id"]
        ),
        columns=["platform", "chat_id", "message_id", "worker", "replies", "finished_at"],
    )


def _handled(
    platform: str, chat_id: str, message_id: str, worker: str, replies: int
) -> dict[str, object]:
    return {
        "platform": platform,
        "chat_id": chat_id,
        "message_id": message_id,
        "worker": worker,
        "replies": replies,
        "finished_at": datetime.now(UTC),
    }


class ClusterStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Checked in the transaction that records a finished turn (`Storage.set_fence`).
        self.fence: Callable[[Connection, str, str], None] | None = None

    # -- turns -------------------------------------------------------------------------------
    def finished(self, platform: str, chat_id: str, message_id: str) -> int | None:
        """How many replies the finished turn of this message sent; None if it never finished."""
        q = select(handled_messages_table.c.replies).where(
            handled_messages_table.c.platform == platform,
            handled_messages_table.c.chat_id == chat_id,
            handled_messages_table.c.message_id == message_id,
        )
        with self.engine.connect() as conn:
            return conn.execute(q).scalar_one_or_none()

    def owed(
        self, platform: str, chat_id: str, message_id: str, replies: int
    ) -> list[tuple[int, OutboxEntry]]:
        """The replies of a finished turn (`replies` of them, keyed `<message id>#<position>`)
        whose rows are still pending, with their positions, in order: a worker that died
        between the turn's last write and relaying it left them to the message's
        redelivery."""
        keys = [f"{message_id}#{i}" for i in range(replies)]
        if not keys:
            return []
        o = outbox_table.c
        q = (
            select(o.id, o.platform, o.chat_id, o.payload, o.state, o.created_at, o.key)
            .where(
                o.platform == platform,
                o.chat_id == chat_id,
                o.key.in_(keys),
                o.state == "pending",
            )
            .order_by(o.id)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [(int(str(r.key).rpartition("#")[2]), _entry(r)) for r in rows]

    def finish(
        self, platform: str, chat_id: str, message_id: str, worker: str, replies: int
    ) -> bool:
        """Record a finished turn; False when another worker recorded it first."""
        try:
            with self.engine.begin() as conn:
                if self.fence is not None:
                    self.fence(conn, platform, chat_id)
                conn.execute(
                    handled_messages_table.insert(),
                    _handled(platform, chat_id, message_id, worker, replies),
                )
            return True
        except IntegrityError:
            return False

    def finish_in(
        self,
        conn: Connection,
        platform: str,
        chat_id: str,
        message_id: str,
        worker: str,
        replies: int,
    ) -> bool:
        """`finish` inside a transaction the caller holds, as an insert that skips a row
        already recorded (an IntegrityError would roll back the caller's other writes). False
        on a database without such an insert (nothing written): the caller uses `finish`
        after its commit. Whether this insert or an earlier one recorded the turn is not
        read: on a pipelined connection that would be a wait of its own."""
        stmt = _handled_insert(conn.dialect.name)
        if stmt is None:
            return False
        stmt.execute(conn, _handled(platform, chat_id, message_id, worker, replies))
        return True

    def unfinished(self, since: datetime) -> list[Row[Any]]:
        """User messages stored since `since` whose turn never finished (a crash cut it), in
        arrival order: not recorded in `handled_messages`, and the bot sent nothing in their
        chat after them (a turn that already replied is not run again: at most once beats twice).
        Rows without a platform message id or stored before migration 0005 are left alone."""
        u = messages_table.alias("u")
        b = messages_table.alias("b")
        h = handled_messages_table
        replied = (
            select(b.c.id)
            .where(
                b.c.platform == u.c.platform,
                b.c.chat_id == u.c.chat_id,
                b.c.id > u.c.id,
                b.c.role.in_(("assistant", "notice")),
            )
            .exists()
        )
        finished = (
            select(h.c.message_id)
            .where(
                h.c.platform == u.c.platform,
                h.c.chat_id == u.c.chat_id,
                h.c.message_id == u.c.message_id,
            )
            .exists()
        )
        q = (
            select(u)
            .where(
                u.c.role == "user",
                u.c.message_id != "",
                u.c.is_at_bot.is_not(None),
                u.c.created_at >= since,
                ~finished,
                ~replied,
            )
            .order_by(u.c.id)
        )
        with self.engine.connect() as conn:
            return list(conn.execute(q).all())

    def recent_chats(self, platform: str, since: datetime) -> list[tuple[str, datetime]]:
        """The chats of `platform` with a user message stored since `since`, each with the
        time of its newest one: where a OneBot catch-up looks for messages missed while the
        bot was away."""
        m = messages_table.c
        q = (
            select(m.chat_id, func.max(m.created_at))
            .where(m.platform == platform, m.role == "user", m.created_at >= since)
            .group_by(m.chat_id)
        )
        with self.engine.connect() as conn:
            return [
                (str(chat), last if last.tzinfo else last.replace(tzinfo=UTC))
                for chat, last in conn.execute(q)
            ]

    def stored_message(self, platform: str, chat_id: str, role: str, message_id: str) -> int | None:
        """The history row already stored under this id (a redelivery after a worker died
        mid-turn), so it is not stored twice."""
        with self.engine.connect() as conn:
            return self.stored_message_in(conn, platform, chat_id, role, message_id)

    @staticmethod
    def stored_message_in(
        conn: Connection, platform: str, chat_id: str, role: str, message_id: str
    ) -> int | None:
        q = (
            select(messages_table.c.id)
            .where(
                messages_table.c.platform == platform,
                messages_table.c.chat_id == chat_id,
                messages_table.c.message_id == message_id,
                messages_table.c.role == role,
            )
            .limit(1)
        )
        return conn.execute(q).scalar_one_or_none()

    # -- workers -----------------------------------------------------------------------------
    def seen(self, worker: str, host: str) -> None:
        now = datetime.now(UTC)
        with self.engine.begin() as conn:
            done = conn.execute(
                update(workers_table).where(workers_table.c.id == worker).values(seen_at=now)
            ).rowcount
            if not done:
                conn.execute(
                    workers_table.insert().values(id=worker, host=host, started_at=now, seen_at=now)
                )

    def live(self, within: float) -> list[str]:
        """Workers seen in the last `within` seconds (stale rows are deleted on the way)."""
        cutoff = datetime.now(UTC) - timedelta(seconds=within)
        with self.engine.begin() as conn:
            conn.execute(delete(workers_table).where(workers_table.c.seen_at < cutoff))
            return sorted(conn.execute(select(workers_table.c.id)).scalars())

    def gone(self, worker: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(workers_table).where(workers_table.c.id == worker))
