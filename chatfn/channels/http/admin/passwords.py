"""Password hashes of the admin console's users: scrypt (hashlib, no extra library), written as
`scrypt$N$r$p$<salt base64>$<key base64>` so the cost can be raised later without breaking the
hashes already in config files. `chatfn admin passwd USER` prints one."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

# 2**14 x 8 x 1, scrypt's interactive-login cost: 16 MB and tens of milliseconds per check,
# dear for whoever guesses at a leaked hash, cheap for a login (checked off the event loop).
N, R, P = 2**14, 8, 1
KEY_BYTES = 32


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=n,
        r=r,
        p=p,
        maxmem=256 * n * r + 2**20,
        dklen=KEY_BYTES,
    )


def hash_password(password: str, *, n: int = N, r: int = R, p: int = P) -> str:
    salt = secrets.token_bytes(16)
    key = _scrypt(password, salt, n, r, p)
    b64 = base64.b64encode
    return f"scrypt${n}${r}${p}${b64(salt).decode()}${b64(key).decode()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether `password` is the one `stored` was made from; False for a malformed hash (the
    config check refuses those at start) rather than an exception at login."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(key)
        got = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
    except (ValueError, TypeError, MemoryError):
        return False
    return hmac.compare_digest(got, want)


def cost_of(stored: str) -> tuple[int, int, int] | None:
    """The (N, r, p) a hash was made with; None for a malformed one."""
    try:
        scheme, n, r, p, _salt, _key = stored.split("$")
        return (int(n), int(r), int(p)) if scheme == "scrypt" else None
    except ValueError:
        return None


@functools.cache
def dummy_hash(n: int = N, r: int = R, p: int = P) -> str:
    """Checked for an unknown user name and for a user whose password comes from the
    environment, at the cost of the configured hashes, so every failed login costs one scrypt
    of the same size and the answer time does not tell which names exist or how their password
    is kept. Cached per cost (made once, at mount)."""
    return hash_password(secrets.token_hex(8), n=n, r=r, p=p)
