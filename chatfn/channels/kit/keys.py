"""An idempotency key for one part of an outbox row, for a platform that sends at most one
message per key (a request's idempotency field): made from the row's
event id, the part's place in it and a digest of its content, so a part sent just before a
crash (before the row was marked delivered) is not posted again when the outbox sends the row
after the restart, nor when a retry follows a timeout whose answer was lost."""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["part_key"]


def part_key(event_id: int | None, index: object, content: str, limit: int = 64) -> str:
    """`chatfn-<event id>-<index>-<digest of content>`, cut to the platform's `limit` of
    characters; without a row (a direct send), one of the content alone would merge two equal
    messages, so a random one."""
    if event_id is None:
        return uuid.uuid4().hex
    digest = hashlib.blake2s(content.encode(), digest_size=8).hexdigest()
    return f"chatfn-{event_id}-{index}-{digest}"[:limit]
