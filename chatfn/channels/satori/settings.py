"""`channels.satori:`: the Satori channel's settings: issue 36's keys (`endpoint`, `token`,
`platform`) and the pacing and splitting numbers every channel has."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, url_like


class SatoriSettings(PlatformSettings, send_rate=2.0, send_burst=3):
    """A Satori server (Koishi's server-satori, Chronocat, satori-python's server, ...): its
    HTTP API at `{endpoint}/v1/{resource}.{method}` and its event stream at
    `{endpoint}/v1/events`, with the server's `token` when it has one. Every login (platform
    account) the server serves is answered, or only those of `platform` when it is set."""

    # The server's address with its path, e.g. http://127.0.0.1:5500/satori.
    endpoint: Annotated[str, url_like("http://127.0.0.1:5500/satori", unset="")] = ""
    # The server's token (none when it has no authentication).
    token: SecretStr | None = None
    # Answer only this platform's logins (e.g. discord, chronocat); "": all.
    platform: str = ""
    # Characters per message: Satori has no limit of its own, the platforms behind it have.
    max_message_length: int = Field(default=2000, ge=100, le=100000)

    @property
    def api(self) -> str:
        return f"{self.endpoint}/v1"

    @property
    def events(self) -> str:
        return "ws" + self.api.removeprefix("http") + "/events"

    def problem(self) -> str | None:
        if not self.endpoint:
            return "channels.satori.endpoint must be set (the Satori server's address)"
        return None
