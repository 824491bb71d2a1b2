"""`mode: webhook`: the robot's HTTP callback, checked as DingTalk's docs say
(https://open.dingtalk.com/document/orgapp/receive-message, "HTTP 模式" / "验证签名"):

- the request carries the headers `timestamp` (milliseconds) and `sign`;
- `sign` = base64(HMAC-SHA256(key = the app's secret, message = timestamp + "\\n" + secret));
- a `timestamp` more than an hour from now is refused, as DingTalk says to;
- the body is the robot message's JSON (the same object a Stream frame's `data` holds).

A refusal is a 401 / 400 with one warning line; the signature is compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit.webhook import Refused

__all__ = ["MAX_SKEW_MS", "Refused", "check_request", "signature"]

MAX_SKEW_MS = 3600 * 1000


def signature(timestamp: str, secret: str) -> str:
    """DingTalk's `sign` for `timestamp` with the app's `secret`."""
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def check_request(
    body: bytes, headers: Any, secret: str, now_ms: float | None = None
) -> dict[str, Any]:
    """The request's robot message, or Refused saying why (module docstring)."""
    stamp = str(headers.get("timestamp") or "")
    sign = str(headers.get("sign") or "")
    if not stamp.isdigit() or not sign:
        raise Refused(401, "no timestamp or sign header")
    now = time.time() * 1000 if now_ms is None else now_ms
    if abs(now - int(stamp)) > MAX_SKEW_MS:
        raise Refused(401, "timestamp more than an hour from now")
    if not hmac.compare_digest(sign.encode(), signature(stamp, secret).encode()):
        raise Refused(401, "bad sign (not channels.dingtalk.client_secret's)")
    payload = kit.json_object(body)
    if payload is None:
        raise Refused(400, "body is not a JSON object")
    return payload
