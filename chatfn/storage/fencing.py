"""Fencing: a worker that lost a broker partition commits nothing for it (README, "Running more
than one process"; the idea of Kafka's producer epochs and Chubby's sequencers).

RabbitMQ decides who consumes a partition (single active consumer), but it cannot stop a
worker that it gave up on (stopped with SIGSTOP, cut off from the broker) from carrying on
with the turns it already had once it runs again: by then another worker has run those turns.
So each partition has a lease row, `partition_leases` (partition, epoch, holder, claimed_at):

- A worker *claims* a partition when the broker starts delivering it to him (the first message
  on a new consumer channel): epoch + 1, in one transaction. A claim is refused if the row was
  claimed after the message arrived here: this worker stalled between the delivery and its
  claim, and the partition has moved on meanwhile.
- Every write of a turn checks, in the same transaction and before its statements, that the
  partition's epoch is still the one its message was claimed under (`check_lease`, the
  storage's `fence`). The check locks the row in share mode, the claim updates it, so a
  write and a claim are ordered by the database: a write either commits before the new owner's
  claim or sees it and raises `Fenced`, rolling back everything it was to write. Nothing a
  fenced turn would have sent is sent: a message goes out only after its rows are committed.

The lease of the turn being run travels with it as a context variable (`current_lease`, set by
the worker around each message; `Storage.run` carries it to the storage thread). Writes made
outside a partition's work (a reminder, a welcome) carry none and are not fenced.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from chatfn.storage.models import partition_leases_table
from chatfn.storage.prepared import Prepared

_L = partition_leases_table.c
_LEASE = Prepared(select(_L.epoch, _L.holder).where(_L.partition == bindparam("partition")))
_LEASE_SHARED = Prepared(
    select(_L.epoch, _L.holder)
    .where(_L.partition == bindparam("partition"))
    .with_for_update(read=True)
)


class Fenced(Exception):
    """This worker's claim on the partition is not the newest: its turn must not write or
    send anything more (the newest claimant runs it)."""


@dataclass(frozen=True, slots=True)
class Lease:
    partition: int
    epoch: int
    holder: str


current_lease: ContextVar[Lease | None] = ContextVar("current_lease", default=None)


def check_lease(conn: Connection, platform: str = "", chat_id: str = "") -> None:
    """The fence of every write of a turn, inside its transaction: raise `Fenced` when the
    partition of the turn being run (`current_lease`) was claimed by someone else since. No
    lease in the context (a single process, a reminder): nothing to check. `platform` and
    `chat_id` name the chat written for, in the error."""
    lease = current_lease.get()
    if lease is None:
        return
    # A share lock on PostgreSQL: writes of the partition go together; a claim (an UPDATE)
    # waits for them, and they for it. (SQLite has one writer at a time anyway.) Read at once,
    # before the transaction sends anything else (in a pipelined transaction, one round trip
    # with its BEGIN).
    stmt = _LEASE_SHARED if conn.dialect.name == "postgresql" else _LEASE
    rows = stmt.rows(conn, {"partition": lease.partition})
    row = rows[0] if rows else None
    if row is None or row[0] != lease.epoch:
        now = "nobody" if row is None else f"{row[1]} (epoch {row[0]})"
        raise Fenced(
            f"partition {lease.partition} was claimed by {now} since this worker's claim "
            f"(epoch {lease.epoch}); nothing is written for {platform} {chat_id}"
        )


class LeaseStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def claim(self, partition: int, holder: str, delivered_at: datetime) -> Lease | None:
        """Claim `partition` for `holder`, whose consumer received a message of it at
        `delivered_at`: the next epoch, or None when someone claimed it after that moment
        (this worker stalled since the delivery; the newer claimant owns it)."""
        now = datetime.now(UTC)
        with self.engine.begin() as conn:
            row = conn.execute(
                select(_L.epoch, _L.claimed_at).where(_L.partition == partition).with_for_update()
            ).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            partition_leases_table.insert().values(
                                partition=partition, epoch=1, holder=holder, claimed_at=now
                            )
                        )
                    return Lease(partition, 1, holder)
                except IntegrityError:  # another worker's first claim at the same moment
                    row = conn.execute(
                        select(_L.epoch, _L.claimed_at)
                        .where(_L.partition == partition)
                        .with_for_update()
                    ).one()
            claimed = row.claimed_at
            if claimed.tzinfo is None:  # SQLite keeps no zone; every stored time is UTC
                claimed = claimed.replace(tzinfo=UTC)
            if claimed > delivered_at:
                return None
            conn.execute(
                update(partition_leases_table)
                .where(_L.partition == partition)
                .values(epoch=row.epoch + 1, holder=holder, claimed_at=now)
            )
            return Lease(partition, row.epoch + 1, holder)

    def holder(self, partition: int) -> tuple[str, int] | None:
        """(holder, epoch) of the partition's newest claim."""
        with self.engine.connect() as conn:
            row = conn.execute(select(_L.holder, _L.epoch).where(_L.partition == partition)).first()
        return None if row is None else (str(row.holder), int(row.epoch))

    def still_holds(self, lease: Lease) -> bool:
        """Whether `lease` is still the partition's newest claim (read, no lock): before a
        message is sent that could not be stored (the database was away), so a worker that
        lost the partition does not send it."""
        return self.holder(lease.partition) == (lease.holder, lease.epoch)
