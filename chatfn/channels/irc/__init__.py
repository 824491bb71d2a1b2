"""The IRC channel: a bot on an IRC network, in its channels and in private messages
(channel.py; the wire format and the connection protocol.py, the 512-byte lines send.py).
This module is the channel's declaration, found through the `chatfn.channels` entry point
`irc`; it needs nothing beyond the standard library (the `irc` extra is empty)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.irc.settings import IrcSettings
from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: IrcSettings) -> Any:
    from chatfn.channels.irc.channel import IrcChannel

    return IrcChannel(host, settings)


async def check(settings: IrcSettings, online: bool) -> list[Probe]:
    if (why := settings.problem()) is not None:
        return [Probe("fail", why)]
    where = f"{settings.server}:{settings.port}{' (TLS)' if settings.tls else ''}"
    probes = [Probe("ok", f"IRC server {where}, nick {settings.nick}")]
    if online:
        probes.append(await registers(settings))
    return probes


async def registers(settings: IrcSettings) -> Probe:
    """Connect and register (the server's welcome, 001), then QUIT: the nick and password
    work, or why not."""
    from chatfn.channels.irc.channel import IrcChannel
    from chatfn.common.messages import NotDelivered

    name = "channel irc register"
    channel = IrcChannel(_ProbeHost(), settings)  # type: ignore[arg-type]
    try:
        said = await channel.connect()
    except NotDelivered as exc:  # refused credentials (naming the key), unreachable
        return Probe("fail", str(exc), name=name)
    finally:
        await channel.close()
    return Probe("ok", f"registered as {said}", name=name)


class _ProbeHost:
    """The little of a ChannelHost a channel needs to connect once (the probe)."""

    delivery_policy = None

    def register(self, channel: Any) -> None:
        pass

    def kick(self) -> None:
        pass


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
