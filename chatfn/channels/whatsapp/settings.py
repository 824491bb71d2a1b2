"""`channels.whatsapp:`: the WhatsApp Cloud API channel's settings: issue 36's keys
(`phone_number_id`, `access_token`, `app_secret`, `verify_token`, `api_base`), the Graph API
version, where the webhook is served, the template sent outside the 24-hour window, and the
pacing and splitting numbers every channel has."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings, path_like, url_like

DEFAULT_API_BASE = "https://graph.facebook.com"
_WHERE = "(Meta App Dashboard -> WhatsApp -> API Setup, and App settings -> Basic)"
_VERSION = re.compile(r"^v\d+\.\d+$")


class WhatsAppSettings(PlatformSettings):
    """A WhatsApp Business phone number on the Cloud API. Meta checks the webhook with a GET
    (`hub.verify_token` = `verify_token`) and POSTs events to `webhook_path` on the HTTP
    channel's port, signed with `app_secret` (`X-Hub-Signature-256`); messages go to
    `{api_base}/{api_version}/{phone_number_id}/messages` with `access_token`."""

    # API Setup -> Phone number ID (not the phone number).
    phone_number_id: str = ""
    # A System User's permanent token (whatsapp_business_messaging).
    access_token: SecretStr | None = None
    # Checks the webhook's signatures (App settings -> Basic -> App secret).
    app_secret: SecretStr | None = None
    # Any string, typed also in Webhooks -> Verify token (Meta's GET check of the URL).
    verify_token: SecretStr | None = None
    # The Graph API root (Meta's unless a proxy or a local server stands in).
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # The Graph API version in every URL.
    api_version: str = "v23.0"
    # The webhook's path on the HTTP channel's port.
    webhook_path: Annotated[str, path_like("/whatsapp/webhook")] = "/whatsapp/webhook"
    # A message template (approved in WhatsApp Manager, no parameters) sent instead of an
    # answer when the user last wrote more than 24 hours ago (WhatsApp allows free-form
    # messages only within that window). Not set: such an answer is refused with a log line.
    template: str | None = None
    # The template's language code, as approved ("en_US", "zh_CN").
    template_language: str = "en_US"
    # Seconds the webhook waits for its messages to be stored before answering 200 (not
    # stored in time: 500, and Meta sends the event again).
    ack_wait: float = Field(default=3.0, gt=0, le=15)
    # Characters per text message (WhatsApp's limit is 4096).
    max_message_length: int = Field(default=4096, ge=100, le=4096)

    @field_validator("api_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _VERSION.match(v):
            raise ValueError(f"expected a Graph API version such as v23.0, got {v!r}")
        return v

    @field_validator("phone_number_id")
    @classmethod
    def _phone_number_id(cls, v: str) -> str:
        if v and not v.isdigit():
            raise ValueError(
                f"expected the phone number's id (digits, API Setup -> Phone number ID), not {v!r}"
            )
        return v

    @property
    def graph(self) -> str:
        """The Graph API root with its version."""
        return f"{self.api_base}/{self.api_version}"

    def problem(self) -> str | None:
        keys = ("phone_number_id", "access_token", "app_secret", "verify_token")
        return self.unset("whatsapp", keys, _WHERE)
