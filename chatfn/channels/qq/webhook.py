"""QQ's HTTP callbacks (webhook mode): Ed25519 signatures with keys derived from the bot's
secret (https://bot.q.qq.com/wiki/develop/api-v2/dev-prepare/interface-framework/sign.html).

The key: the secret repeated until it has 32 bytes, cut to 32, is the Ed25519 seed. QQ signs
`X-Signature-Timestamp` + the raw body and sends the signature hex-encoded in
`X-Signature-Ed25519`; the bot checks it with the seed's public key. Validating the callback
URL (op 13, `d: {plain_token, event_ts}`) is answered with `{plain_token, signature}`, the
bot's own signature of `event_ts` + `plain_token`. Events (op 0) are answered `{"op": 12}`
(HTTP Callback ACK) within QQ's 3 seconds.

QQ documents no age limit for the timestamp, so none is enforced; a replayed event is
answered once (event ids and message ids are remembered, and stored messages are not handled
again).
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["Signer"]


def seed(secret: str) -> bytes:
    """The 32-byte Ed25519 seed QQ derives from a bot secret."""
    raw = secret.encode()
    if not raw:
        raise ValueError("the bot secret is empty")
    while len(raw) < 32:
        raw = raw * 2
    return raw[:32]


class Signer:
    """Signs and verifies as QQ does for one bot secret."""

    def __init__(self, secret: str) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(seed(secret))
        self._public = self._key.public_key()

    def sign(self, message: bytes) -> str:
        return self._key.sign(message).hex()

    def verify(self, timestamp: str, body: bytes, signature: str) -> bool:
        try:
            sig = bytes.fromhex(signature)
        except ValueError:
            return False
        if len(sig) != 64 or sig[63] & 224:
            return False
        try:
            self._public.verify(sig, timestamp.encode() + body)
        except InvalidSignature:
            return False
        return True

    def validation(self, plain_token: str, event_ts: str) -> dict[str, str]:
        """The answer to op 13."""
        return {
            "plain_token": plain_token,
            "signature": self.sign(event_ts.encode() + plain_token.encode()),
        }
