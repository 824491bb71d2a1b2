"""`channels.mattermost:`: the Mattermost channel's settings: issue 36's keys (`url`,
`token`, `team`) and the pacing and splitting numbers every channel has."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, url_like

_WHERE = "(System Console -> Integrations -> Bot Accounts)"


class MattermostSettings(PlatformSettings, send_rate=5.0, send_burst=5):
    """A Mattermost bot account: REST API v4 at `{url}/api/v4` and its WebSocket
    (`{url}/api/v4/websocket`) with the bot's access `token`; the bot answers in `team`'s
    channels and in direct messages."""

    # The server's address, e.g. https://chat.example.com.
    url: Annotated[str, url_like("https://chat.example.com", unset="")] = ""
    # The bot account's access token.
    token: SecretStr | None = None
    # The team's name as in its URL (chat.example.com/<team>/...).
    team: str = ""
    # Characters per post (Mattermost's MaxPostSize: 16383 by default).
    max_message_length: int = Field(default=16383, ge=100, le=65535)

    @property
    def api(self) -> str:
        return f"{self.url}/api/v4"

    @property
    def websocket(self) -> str:
        return "ws" + self.api.removeprefix("http") + "/websocket"

    def problem(self) -> str | None:
        return self.unset("mattermost", ("url", "token", "team"), _WHERE)
