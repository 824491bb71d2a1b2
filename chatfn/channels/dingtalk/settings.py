"""`channels.dingtalk:`: the DingTalk channel's settings (issue 42's keys, and the pacing and
splitting numbers every channel has)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, origin_like, path_like

#: DingTalk's OpenAPI (and the Stream connection endpoint); its older API lives on OAPI.
API_BASE = "https://api.dingtalk.com"
OAPI_BASE = "https://oapi.dingtalk.com"


class DingTalkSettings(
    PlatformSettings,
    send_rate=0.3,
    send_burst=5,
    pace="DingTalk's robots may send 20 messages a minute per chat; the pace stays under it.",
):
    """A DingTalk internal app with the robot ability. `client_id` / `client_secret` are the
    app's Client ID (AppKey) and Client Secret (AppSecret): the access token
    (/v1.0/oauth2/accessToken), the Stream connection (`mode: stream`, no public address
    needed) and the HTTP callback's signature (`mode: webhook`) all use them. `api_base` is
    DingTalk's own address by default and covers the OpenAPI, the Stream connection endpoint
    and OAPI (oapi.dingtalk.com) alike: pointed elsewhere, all three go there."""

    # The app's Client ID (AppKey), from the developer console's 凭证与基础信息.
    client_id: str = ""
    client_secret: SecretStr | None = None
    mode: Literal["stream", "webhook"] = "stream"
    # DingTalk's API (api.dingtalk.com); the OAPI calls follow it when pointed elsewhere.
    api_base: Annotated[str, origin_like(API_BASE)] = API_BASE
    # The robot's code; for an internal app's robot it is the app's Client ID (the default).
    robot_code: str = ""
    # Where DingTalk POSTs messages in webhook mode (on the HTTP channel's port).
    webhook_path: Annotated[str, path_like("/dingtalk/callback")] = "/dingtalk/callback"
    # Characters of Markdown per message: msgParam may hold 15,000 bytes, 4000 characters
    # stay below it in CJK (3 bytes each) with the JSON around them.
    max_message_length: int = Field(default=4000, ge=100, le=5000)

    @property
    def oapi_base(self) -> str:
        """Where OAPI calls go (media upload, session webhooks): oapi.dingtalk.com beside
        DingTalk's own api_base, else api_base itself."""
        return OAPI_BASE if self.api_base == API_BASE else self.api_base

    @property
    def robot(self) -> str:
        return self.robot_code or self.client_id

    def problem(self) -> str | None:
        if not self.client_id or self.client_secret is None:
            return (
                "channels.dingtalk.client_id and channels.dingtalk.client_secret must be set "
                "(the app's Credentials & Basic Info page)"
            )
        return None
