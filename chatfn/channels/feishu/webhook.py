"""`mode: webhook`: what the open platform POSTs to the app's request URL, checked and opened
(https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-
configure-/request-url-configuration-case and .../encrypt-key-encryption-configuration-case):

- With an encrypt_key the body is `{"encrypt": base64(iv + AES-256-CBC(json))}`, the key being
  SHA-256 of encrypt_key (decrypted with lark-oapi's AESCipher); a plain body is then
  refused. Every event (not the URL check) is signed: `X-Lark-Signature` =
  hex SHA-256 of `X-Lark-Request-Timestamp + X-Lark-Request-Nonce + encrypt_key + body`.
- The verification_token is in the event's `header.token` (schema 2.0), or the `token` of
  the URL check (`{"type": "url_verification", "challenge", "token"}`, answered with
  `{"challenge"}`); both are compared in constant time.

Why not lark-oapi's `EventDispatcherHandler.do`: it answers every refusal with HTTP 500 and a
logged traceback (the platform then retries a forged request as if the bot were broken), and
runs handlers synchronously inside the request. Here a refusal is a 401 / 400 with one
warning, and the event goes to the channel's queue before the 200 (the platform wants an
answer within 3 seconds and resends otherwise).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from chatfn.channels.kit.webhook import Refused, json_request
from chatfn.channels.kit.wire import same_secret

__all__ = ["Opened", "Refused", "open_request"]


@dataclass(frozen=True, slots=True)
class Opened:
    """A checked request: the URL check's challenge, or an event payload."""

    challenge: str | None
    payload: dict[str, Any]


def decrypt(encrypt_key: str, encrypted: str) -> str:
    from lark_oapi.core.utils import AESCipher

    return str(AESCipher(encrypt_key).decrypt_str(encrypted))


def open_request(body: bytes, headers: Any, verification_token: str, encrypt_key: str) -> Opened:
    """The request's event, or Refused saying why (module docstring)."""
    outer = json_request(body)
    if "encrypt" in outer:
        if not encrypt_key:
            raise Refused(400, "encrypted event but channels.feishu.encrypt_key is not set")
        try:
            payload = json.loads(decrypt(encrypt_key, str(outer["encrypt"])))
        except Exception:
            raise Refused(401, "event does not decrypt with channels.feishu.encrypt_key") from None
    elif encrypt_key:
        raise Refused(401, "plain event although channels.feishu.encrypt_key is set")
    else:
        payload = outer
    if not isinstance(payload, dict):
        raise Refused(400, "event is not a JSON object")
    if payload.get("type") == "url_verification":
        if not same_secret(str(payload.get("token") or ""), verification_token):
            raise Refused(401, "URL check with a wrong verification_token")
        return Opened(str(payload.get("challenge") or ""), payload)
    if encrypt_key:
        stamp = headers.get("X-Lark-Request-Timestamp", "")
        nonce = headers.get("X-Lark-Request-Nonce", "")
        signature = headers.get("X-Lark-Signature", "")
        expected = hashlib.sha256((stamp + nonce + encrypt_key).encode() + body).hexdigest()
        if not signature or not same_secret(signature, expected):
            raise Refused(401, "bad X-Lark-Signature")
    header = payload.get("header")
    if not isinstance(header, dict):
        header = {}
    token = str(header.get("token") or payload.get("token") or "")
    if not same_secret(token, verification_token):
        raise Refused(401, "event with a wrong verification_token")
    return Opened(None, payload)
