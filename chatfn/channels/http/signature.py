"""The webhook's signature: what lets a receiver know a POST came from this bot, unchanged and
recently, without the bot ever sending a credential (the `/v1` token lets its holder speak as
any user, admins included, so it never leaves the bot).

    X-Chatfn-Timestamp: <seconds since the epoch, an integer>
    X-Chatfn-Signature: sha256=<hex HMAC-SHA256(webhook_secret, f"{timestamp}.{body}")>

`body` is the request body exactly as sent (bytes). The timestamp is inside the signed bytes,
so a receiver that refuses old timestamps (five minutes, say) also refuses a replayed POST; a
retried delivery is signed again with a new timestamp. The same scheme as Stripe's and
Standard Webhooks' (`timestamp.body`); README.md shows the receiver's check.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Chatfn-Signature"
TIMESTAMP_HEADER = "X-Chatfn-Timestamp"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 keyed with `secret` over `<timestamp>.<body>`."""
    signed = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signed_headers(secret: str | None, body: bytes, now: float | None = None) -> dict[str, str]:
    """The signature headers of one POST of `body` (none without a secret)."""
    if not secret:
        return {}
    timestamp = int(time.time() if now is None else now)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }
