"""`channels.feishu:`: the Feishu / Lark channel's settings (issue 25's keys, and the pacing and
splitting numbers every channel has)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from chatfn.channels.kit.fields import path
from chatfn.channels.kit.settings import PlatformSettings, https_origin

#: `domain: feishu` / `domain: lark`: the open platform's origin for each.
DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}


class FeishuSettings(
    PlatformSettings,
    send_rate=4.0,
    send_burst=5,
    pace="The pace (PlatformSettings'): Feishu allows 5 per second per user and per group "
    "(shared by the group's bots).",
):
    """A Feishu (or Lark) custom app with the bot ability. API calls go to `{base_url}/open-apis/`
    with a tenant_access_token made from `app_id` + `app_secret`; events come over the
    platform's long connection (`mode: websocket`, no public address needed) or are POSTed to
    `webhook_path` on the HTTP channel's port (`mode: webhook`, checked with
    `verification_token` and, when set, decrypted and signature-checked with `encrypt_key`)."""

    # The app's App ID (cli_...), from the developer console's 凭证与基础信息.
    app_id: str = ""
    app_secret: SecretStr | None = None
    # "feishu" (open.feishu.cn), "lark" (open.larksuite.com) or an origin such as
    # https://open.feishu.cn (tests: http://127.0.0.1:PORT).
    domain: str = "feishu"
    mode: Literal["websocket", "webhook"] = "websocket"
    verification_token: SecretStr | None = None
    encrypt_key: SecretStr | None = None
    # Where the platform POSTs events in webhook mode (on the HTTP channel's port).
    webhook_path: Annotated[str, path("/feishu/events")] = "/feishu/events"
    # Characters of Markdown per message. Feishu refuses a card body over 30 KB; 4000
    # characters stay below it even in CJK with every character escaped.
    max_message_length: int = Field(default=4000, ge=100, le=8000)
    # Seconds a group's owner and managers (im/v1/chats/{chat_id}) are remembered.
    role_cache_seconds: float = Field(default=300.0, ge=0)

    @field_validator("domain")
    @classmethod
    def _domain(cls, v: str) -> str:
        if v.strip().lower() in DOMAINS:
            return v.strip().lower()
        expected = f"feishu, lark or an https origin like {DOMAINS['feishu']}"
        return https_origin(v, expected, "; requests go to {domain}/open-apis/...")

    @model_validator(mode="after")
    def _webhook_needs_a_token(self) -> FeishuSettings:
        if self.mode == "webhook" and self.verification_token is None:
            raise ValueError(
                "mode: webhook needs channels.feishu.verification_token (the app's Event "
                "Subscriptions -> Verification Token) so that forged events are refused"
            )
        return self

    @property
    def base_url(self) -> str:
        """The open platform's origin: https://open.feishu.cn, https://open.larksuite.com or
        the configured one."""
        return DOMAINS.get(self.domain, self.domain)

    def problem(self) -> str | None:
        return self.unset(
            "feishu", ("app_id", "app_secret"), "(the app's Credentials & Basic Info page)"
        )
