"""Ids that make a send safe to repeat: each part of an outbox row gets one made from the row's
id and the part's place (and, for a key, a hash of the part), the same on every retry of the
row. A platform that refuses or deduplicates a repeated id then lets a row sent again after a
crash (between the platform taking it and the outbox marking it delivered) count as
delivered instead of going out twice."""

from __future__ import annotations

import hashlib
import uuid

from chatfn.common.messages import OutgoingMessage

__all__ = ["part_key", "part_seq"]


def part_seq(row: int, index: int) -> int:
    """A number for part `index` of outbox row `row`: the same on every retry of the row,
    different for every part and row that may answer the same message (within 2^31)."""
    return (row % 50_000_000) * 40 + index + 1


def part_key(out: OutgoingMessage, index: int, part: str, prefix: str = "chatfn") -> str:
    """A text id for the `index`th part of `out`: the row, the place and a hash of the chat and
    the part (a reused row id, a new database, never matches an old send of other words); a
    message not from the outbox gets a new one each time (nothing to repeat)."""
    if out.event_id is None:
        return f"{prefix}-{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{out.chat_id}\0{part}".encode()).hexdigest()[:16]
    return f"{prefix}-{out.event_id}-{index}-{digest}"
