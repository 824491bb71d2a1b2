"""Ids that make one part of an outbox row safe to send again, the same on every retry of the
row: a key for a platform that sends at most one message per key (a request's idempotency
field, a transaction id), made from the row's event id, the part's place in it and a digest
of its content; and a number for a platform that takes one message per (message, sequence
number). A part sent just before a crash (before the row was marked delivered) is then not
posted again when the outbox sends the row after the restart, nor when a retry follows a
timeout whose answer was lost."""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["part_key", "part_seq"]


def part_key(
    event_id: int | None, index: object, content: str, limit: int = 64, short: bool = False
) -> str:
    """`chatfn-<event id>-<index>-<digest of content>`, cut to the platform's `limit` of
    characters; without a row (a direct send), one of the content alone would merge two equal
    messages, so a random one. `short`: `cf<event id>.<index>.<shorter digest>`, for a
    platform whose keys are a few characters long."""
    if event_id is None:
        return uuid.uuid4().hex
    digest = hashlib.blake2s(content.encode(), digest_size=4 if short else 8).hexdigest()
    key = f"cf{event_id}.{index}.{digest}" if short else f"chatfn-{event_id}-{index}-{digest}"
    return key[:limit]


def part_seq(row: int, index: int) -> int:
    """A number for part `index` of outbox row `row`: the same on every retry of the row,
    different for every part and row that may answer the same message (within 2^31)."""
    return (row % 50_000_000) * 40 + index + 1
