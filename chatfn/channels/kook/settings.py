"""`channels.kook:`: the KOOK (formerly KaiHeiLa) bot channel's settings: issue 42's keys
`token` and `api_base`, and the pace, the splitting and the gateway's compression."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, url_like
from chatfn.common.config import ConfigPath

#: KOOK's API root (https://developer.kookapp.cn/doc/reference, "BaseUrl"); calls go to
#: `{api_base}/v3/...`.
DEFAULT_API_BASE = "https://www.kookapp.cn/api"
#: "为了保障消息正常发出，请不要超过 8000 字符" (developer.kookapp.cn/doc/http/message).
KOOK_MAX_CONTENT = 8000


class KookSettings(PlatformSettings):
    """A KOOK bot: its token (developer.kookapp.cn -> Applications -> the bot -> Bot ->
    Token), sent as `Authorization: Bot <token>`; events by the WebSocket gateway (the bot's
    connection mode must be WebSocket, not Webhook: KOOK sends events one way only)."""

    # The bot's token (developer centre -> the application -> Bot -> Token).
    token: SecretStr | None = None
    # KOOK's API root (a proxy, or a local server in tests).
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # The gateway's frames zlib-compressed (GET /v3/gateway/index?compress=1, KOOK's default).
    compress: bool = True
    # Characters of one message's KMarkdown content (KOOK asks for at most 8000).
    max_message_length: int = Field(default=KOOK_MAX_CONTENT, ge=100, le=KOOK_MAX_CONTENT)
    # Where the gateway session and the last event stored are kept between runs (state.py):
    # a restart resumes the session and KOOK sends again what was read but not stored.
    state_path: ConfigPath = "data/kook"
    # Seconds a guild's roles and owner are kept before they are read again (trust_group_admins).
    roles_ttl: float = Field(default=300.0, ge=0)

    def problem(self) -> str | None:
        if self.token is None:
            return (
                "channels.kook.token is not set (the bot's token from developer.kookapp.cn -> "
                "Applications -> your bot -> Bot)"
            )
        return None

    def token_value(self) -> str:
        return self.secret_text("token")
