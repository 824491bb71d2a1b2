"""The QR-code login of an iLink bot, as one function the command line (`chatfn login weixin`)
and the admin console share: `qr_login(settings, show)` asks iLink for a QR code, hands its
content to `show("qr", content)` (the terminal prints it, the console draws it), reports the
scan (`show("status", line)`), waits for the confirmation and returns the `Login` to keep.
It stores nothing itself.

The protocol (Tencent/openclaw-weixin docs/protocol.md "QR-code login", src/auth/login-qr.ts;
AstrBot's weixin_oc adapter; Hermes Agent's qr_login):

- `POST {base}/ilink/bot/get_bot_qrcode?bot_type=3` (`{"local_token_list": []}`):
  `qrcode` (the id polled) and `qrcode_img_content` (what the QR code shows, a URL);
- `GET {base}/ilink/bot/get_qrcode_status?qrcode=<qrcode>`, a long poll: `wait`, `scaned`,
  `expired` (a new code, at most three in all), `scaned_but_redirect` (go on polling at
  `https://<redirect_host>`), `confirmed` with `bot_token`, `ilink_bot_id`, `baseurl` and
  `ilink_user_id`; `need_verifycode`, `verify_code_blocked` and `binded_redirect` end it here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import aiohttp

from chatfn.channels.weixin.api import client_headers
from chatfn.channels.weixin.settings import WeixinSettings
from chatfn.channels.weixin.state import Login

__all__ = ["MAX_CODES", "LoginFailed", "qr_login"]

#: QR codes shown before giving up (each lives about five minutes).
MAX_CODES = 3
Show = Callable[[str, str], None]


class LoginFailed(Exception):
    """The login did not complete: the reason, for the operator."""


async def _json(response: aiohttp.ClientResponse, what: str) -> dict[str, Any]:
    text = await response.text()
    if response.status >= 400:
        raise LoginFailed(f"{what}: HTTP {response.status} {text[:120]}")
    try:
        data = json.loads(text)
    except ValueError:
        raise LoginFailed(f"{what}: not JSON: {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise LoginFailed(f"{what}: not a JSON object")
    return data


async def _new_code(session: aiohttp.ClientSession, settings: WeixinSettings, show: Show) -> str:
    url = f"{settings.base_url}/ilink/bot/get_bot_qrcode?bot_type={quote(settings.bot_type)}"
    headers = {"Content-Type": "application/json", **client_headers()}
    async with session.post(
        url,
        data=json.dumps({"local_token_list": []}),
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=15),
    ) as response:
        data = await _json(response, "get_bot_qrcode")
    code, content = str(data.get("qrcode") or ""), str(data.get("qrcode_img_content") or "")
    if not code or not content:
        raise LoginFailed("get_bot_qrcode gave no qrcode")
    show("qr", content)
    return code


async def _status(
    session: aiohttp.ClientSession, base: str, code: str, timeout: float
) -> dict[str, Any]:
    url = f"{base}/ilink/bot/get_qrcode_status?qrcode={quote(code, safe='')}"
    try:
        async with session.get(
            url, headers=client_headers(), timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            return await _json(response, "get_qrcode_status")
    except TimeoutError:  # the long poll's normal end
        return {"status": "wait"}


def _confirmed(data: dict[str, Any], base: str) -> Login:
    token, bot = str(data.get("bot_token") or ""), str(data.get("ilink_bot_id") or "")
    if not token or not bot:
        raise LoginFailed("the login was confirmed without a bot_token or ilink_bot_id")
    return Login(
        token=token,
        base_url=str(data.get("baseurl") or base).rstrip("/"),
        bot_id=bot,
        user_id=str(data.get("ilink_user_id") or ""),
    )


_ENDS = {
    "need_verifycode": "WeChat asks for a verification code, which this login cannot enter",
    "verify_code_blocked": "too many wrong verification codes: try again later",
    "binded_redirect": "this WeChat bot is already bound to another client",
}


async def qr_login(
    settings: WeixinSettings,
    show: Show,
    *,
    session: aiohttp.ClientSession | None = None,
    pause: float = 1.0,
    poll_timeout: float = 35.0,
) -> Login:
    """The login (module docstring); LoginFailed with the reason, TimeoutError after
    `settings.login_timeout` seconds."""
    own = session is None
    session = session or aiohttp.ClientSession()
    try:
        async with asyncio.timeout(settings.login_timeout):
            return await _wait(session, settings, show, pause, poll_timeout)
    except aiohttp.ClientError as exc:
        raise LoginFailed(f"iLink not reachable at {settings.base_url} ({exc})") from None
    finally:
        if own:
            await session.close()


async def _wait(
    session: aiohttp.ClientSession,
    settings: WeixinSettings,
    show: Show,
    pause: float,
    poll_timeout: float,
) -> Login:
    base, codes, scanned = settings.base_url, 1, False
    code = await _new_code(session, settings, show)
    while True:
        began = time.monotonic()
        data = await _status(session, base, code, poll_timeout)
        status = str(data.get("status") or "wait")
        if status == "confirmed":
            return _confirmed(data, base)
        if status in _ENDS:
            raise LoginFailed(_ENDS[status])
        if status == "scaned" and not scanned:
            scanned = True
            show("status", "scanned: confirm the login in WeChat")
        elif status == "scaned_but_redirect" and data.get("redirect_host"):
            base = f"https://{data['redirect_host']}"
        elif status == "expired":
            codes += 1
            if codes > MAX_CODES:
                raise LoginFailed(f"the QR code expired {MAX_CODES} times: run the login again")
            show("status", f"the QR code expired: a new one ({codes}/{MAX_CODES})")
            code, scanned = await _new_code(session, settings, show), False
        if time.monotonic() - began < pause:
            await asyncio.sleep(pause)
