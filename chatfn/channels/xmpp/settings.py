"""`channels.xmpp:`: the XMPP channel's settings: issue 36's keys `jid`, `password`, `server`
and `rooms`, and the bot's nick in rooms, TLS and the length of one message."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings

#: The longest body sent in one message (XMPP sets no limit; servers cap a stanza: Prosody
#: at 256 KiB by default, ejabberd 65 KiB); longer replies are split.
DEFAULT_MAX_LENGTH = 4000


def _bare(v: str, what: str) -> str:
    local, at, domain = v.partition("@")
    if not at or not local or not domain or " " in v:
        raise ValueError(f"expected a {what} like name@example.org, got {v!r}")
    return v


class XmppSettings(PlatformSettings):
    """An XMPP account for the bot (`jid`, `password`), the server to reach when it is not
    found from the JID's domain (`server`: `host` or `host:port`), and the group chats
    (XEP-0045 multi-user chat `rooms`, by their JIDs) it joins as `nick`."""

    # The bot's account, name@example.org.
    jid: str = ""
    password: SecretStr | None = None
    # host or host:port to connect to; empty: found from the JID's domain (DNS SRV).
    server: str = ""
    # Multi-user chat rooms to join at start (room@conference.domain).
    rooms: list[str] = Field(default_factory=list)
    # The bot's nick in rooms (default: the JID's local part).
    nick: str = ""
    # STARTTLS required (false: a plain connection allowed, for a server on localhost only).
    tls: bool = True
    # Characters per message; longer replies are split.
    max_message_length: int = Field(default=DEFAULT_MAX_LENGTH, ge=100, le=200_000)
    # Seconds to connect and log in before it counts as unreachable (then retried).
    connect_timeout: float = Field(default=30.0, gt=0)

    @field_validator("jid")
    @classmethod
    def _jid(cls, v: str) -> str:
        return _bare(v.strip(), "JID") if v.strip() else ""

    @field_validator("rooms")
    @classmethod
    def _rooms(cls, v: list[str]) -> list[str]:
        return [_bare(r.strip(), "room JID").lower() for r in v]

    @field_validator("server")
    @classmethod
    def _server(cls, v: str) -> str:
        v = v.strip()
        port = v.rpartition(":")[2] if ":" in v else ""
        if "/" in v or " " in v or (":" in v and not port.isdigit()):
            raise ValueError(f"expected host or host:port, got {v!r}")
        return v

    def problem(self) -> str | None:
        if not self.jid:
            return "channels.xmpp.jid is not set (the bot's account, e.g. bot@example.org)"
        if self.password is None:
            return "channels.xmpp.password is not set (the password of channels.xmpp.jid)"
        return None

    def address(self) -> tuple[str, int] | None:
        """(host, port) from `server`; None: found from the JID's domain (DNS SRV)."""
        if not self.server:
            return None
        host, sep, port = self.server.rpartition(":")
        return (host, int(port)) if sep else (self.server, 5222)

    def room_nick(self) -> str:
        return self.nick or self.jid.split("@", 1)[0]
