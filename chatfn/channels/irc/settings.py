"""`channels.irc:`: the IRC channel's settings: issue 36's keys `server`, `port`, `tls`,
`nick`, `password`, `sasl` and `channels`, and the pace that keeps the bot under a server's
flood control."""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings

#: RFC 2812 section 2.3.1 nickname: a letter or special first, then letters, digits, specials
#: and "-" (servers allow longer than the RFC's 9: ngircd and Libera take 30 or more).
NICK = re.compile(r"^[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]{0,29}$")
#: A channel name: #, &, + or ! and no space, comma, BELL or colon (RFC 2812 section 1.3).
CHANNEL = re.compile(r"^[#&+!][^\s,\x07:]{1,49}$")


class IrcSettings(
    PlatformSettings,
    send_rate=0.0,
    pace="Per-chat pace: none (flood control above is the server's rule).",
):
    """An IRC network: its server (`server`, `port`, `tls`), the bot's `nick`, the
    `password` (the server password, or with `sasl` the account's password given by SASL
    PLAIN, as Libera.Chat and OFTC want), and the `channels` it joins (a channel with a key:
    `"#room key"`). Private messages (queries) reach it without joining anything."""

    # The IRC server's host name ("irc.libera.chat").
    server: str = ""
    # Its port: 6697 for TLS, 6667 for plain text.
    port: int = Field(default=6697, ge=1, le=65535)
    # Connect over TLS.
    tls: bool = True
    # The bot's nick (one in use is tried again with `_` after it).
    nick: str = "chatfn"
    # The server password, or with `sasl` the account's password.
    password: SecretStr | None = None
    # Log in with SASL PLAIN (Libera.Chat, OFTC) instead of a server password.
    sasl: bool = False
    # The channels joined ("#room", or "#room key" for one with a key).
    channels: list[str] = Field(default_factory=list)
    # The account name for SASL (default: `nick`) and the real name shown by WHOIS.
    username: str = ""
    # The real name shown by WHOIS.
    realname: str = "chatfn bot"
    # Flood control: lines a second after a burst of `flood_burst`, for the whole connection
    # (a server counts lines per client, not per chat). Libera.Chat and most ircds keep a
    # client that sends about one line a second after a few at once.
    flood_rate: float = Field(default=1.0, ge=0)
    # Lines sent at once before `flood_rate` paces them.
    flood_burst: int = Field(default=4, ge=1)
    # A reply's lines per message at most (IRC has no long messages: the rest is cut with a
    # note, so one answer cannot fill a channel). 0: no limit.
    max_lines: int = Field(default=0, ge=0)
    # Seconds to wait for the server's welcome (001) after connecting.
    connect_timeout: float = Field(default=30.0, gt=0)

    @field_validator("nick")
    @classmethod
    def _nick(cls, v: str) -> str:
        if not NICK.match(v):
            raise ValueError(f"not an IRC nick: {v!r} (a letter first, at most 30 characters)")
        return v

    @field_validator("channels")
    @classmethod
    def _channels(cls, v: list[str]) -> list[str]:
        for item in v:
            name = item.split(" ", 1)[0]
            if not CHANNEL.match(name):
                raise ValueError(f"not an IRC channel: {item!r} (expected like '#chatfn')")
        return v

    @field_validator("server")
    @classmethod
    def _server(cls, v: str) -> str:
        v = v.strip()
        if "://" in v or "/" in v or " " in v:
            raise ValueError(f"expected a host name like irc.libera.chat, got {v!r}")
        return v

    def problem(self) -> str | None:
        if not self.server:
            return "channels.irc.server is not set (the IRC server's host, e.g. irc.libera.chat)"
        if self.sasl and self.password is None:
            return "channels.irc.sasl is on but channels.irc.password is not set"
        return None

    def account(self) -> str:
        return self.username or self.nick

    def channel_names(self) -> list[str]:
        """The configured channels' names in lower case (the chat ids' form)."""
        return [irc_lower(c.split(" ", 1)[0]) for c in self.channels]


def irc_lower(name: str) -> str:
    """`name` in lower case as IRC compares names (rfc1459 casemapping: []\\~ are the
    upper case of {}|^)."""
    return name.lower().translate(str.maketrans("[]\\~", "{}|^"))
