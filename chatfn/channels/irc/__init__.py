"""The IRC channel: a bot on an IRC network, in its channels and in private messages
(channel.py; the wire format and the connection protocol.py, the 512-byte lines send.py).
This module is the channel's declaration, found through the `chatfn.channels` entry point
`irc`; it needs nothing beyond the standard library (the `irc` extra is empty)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.irc.settings import IrcSettings
from chatfn.channels.kit.declare import checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: IrcSettings) -> Any:
    from chatfn.channels.irc.channel import IrcChannel

    return IrcChannel(host, settings)


def offline(settings: IrcSettings) -> list[Probe]:
    where = f"{settings.server}:{settings.port}{' (TLS)' if settings.tls else ''}"
    return [Probe("ok", f"IRC server {where}, nick {settings.nick}")]


#: Connect and register (the server's welcome, 001), then QUIT: the channel's own connect
#: and close (kit/probe.py). The nick and password work, or why not (refused credentials
#: naming the key, unreachable).
registers = connects(build, "channel irc register")


check = checks(offline, registers)

SPEC = ChannelSpec(
    name="irc",
    settings=IrcSettings,
    factory=build,
    summary="IRC networks (channels and private messages: a client connection)",
    extra="irc",
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        groups=True,
        dms=True,
        mentions=True,
        connection=("long connection",),
    ),
)
