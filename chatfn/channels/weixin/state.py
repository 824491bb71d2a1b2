"""What the WeChat channel keeps in the bot's database (`ChannelHost.load_state` /
`save_state`, under platform `weixin`): the login `chatfn login weixin` stored (`login`:
token, base URL, bot and user ids, as JSON), the getupdates cursor up to which every message
was stored (`cursor:<bot>`), and each chat's newest `context_token` (`context:<chat id>`),
which a reply must carry (a reminder after a restart too).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["LOGIN", "Login", "context_key", "cursor_key"]

LOGIN = "login"


@dataclass(frozen=True, slots=True)
class Login:
    """What a confirmed QR login gives (get_qrcode_status: bot_token, baseurl, ilink_bot_id,
    ilink_user_id)."""

    token: str
    base_url: str = ""
    bot_id: str = ""
    user_id: str = ""
    saved_at: str = ""

    def dumps(self) -> str:
        data = asdict(self)
        data["saved_at"] = data["saved_at"] or datetime.now(UTC).isoformat(timespec="seconds")
        return json.dumps(data)

    @classmethod
    def loads(cls, text: str | None) -> Login | None:
        try:
            data: Any = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("token"), str):
            return None
        fields = ("token", "base_url", "bot_id", "user_id", "saved_at")
        return cls(**{k: str(data.get(k) or "") for k in fields})


def cursor_key(bot: str) -> str:
    return f"cursor:{bot}"[:64]


def context_key(chat_id: str) -> str:
    return f"context:{chat_id}"[:200]
