"""`channels.line:`: the LINE Messaging API channel's settings: issue 36's keys
(`channel_secret`, `channel_access_token`, `api_base`), where the webhook is served, where
pictures are offered to LINE (`public_url`), and the pacing and splitting numbers every
channel has."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, path_like, url_like

#: The Messaging API's root (https://developers.line.biz/en/reference/messaging-api/).
DEFAULT_API_BASE = "https://api.line.me"
#: Where LINE serves the content users sent (GET /v2/bot/message/{id}/content).
DEFAULT_DATA_BASE = "https://api-data.line.me"
_WHERE = "(LINE Developers console -> your Messaging API channel)"


class LineSettings(PlatformSettings, send_rate=5.0, send_burst=5):
    """A LINE Official Account's Messaging API channel. LINE POSTs webhook events to
    `webhook_path` on the HTTP channel's port, signed with `channel_secret`
    (`X-Line-Signature`); answers go by the event's reply token while it is good, else by the
    push API, with `channel_access_token`."""

    # Checks the webhook's signatures (Basic settings -> Channel secret).
    channel_secret: SecretStr | None = None
    # Sends the answers (Messaging API -> Channel access token, long-lived).
    channel_access_token: SecretStr | None = None
    # The Messaging API's root. The content of users' images comes from api-data.line.me;
    # with `api_base` set elsewhere (a proxy, a local server in tests) that serves both.
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # The webhook's path on the HTTP channel's port (LINE's console: Webhook URL).
    webhook_path: Annotated[str, path_like("/line/webhook")] = "/line/webhook"
    # The https address at which LINE's servers reach the bot's web server: a picture the
    # model made is offered to LINE at {public_url}/line/media/<random token> (LINE's image
    # message takes only https URLs). Not set: such pictures are not sent (a warning).
    public_url: Annotated[str | None, url_like("https://bot.example.com", unset=None)] = None
    # Seconds a picture is served at its media URL.
    media_ttl: float = Field(default=600.0, gt=0, le=86400)
    # Seconds a reply token is used after its event came (LINE: about a minute, once);
    # later answers go by the push API.
    reply_token_ttl: float = Field(default=50.0, gt=0, le=60)
    # Seconds the webhook waits for its messages to be stored before answering 200 (not
    # stored in time: 500, and LINE redelivers when webhook redelivery is on).
    ack_wait: float = Field(default=1.5, gt=0, le=10)
    # Characters per text message (LINE's limit is 5000, counted in UTF-16 units).
    max_message_length: int = Field(default=5000, ge=100, le=5000)

    @property
    def data_base(self) -> str:
        """Where users' content is read: api-data.line.me beside the real API, else
        `api_base` (which then serves both)."""
        return DEFAULT_DATA_BASE if self.api_base == DEFAULT_API_BASE else self.api_base

    def problem(self) -> str | None:
        return self.unset("line", ("channel_secret", "channel_access_token"), _WHERE)
