"""The XMPP channel: a bot account in one-to-one chats and multi-user chat rooms (XEP-0045),
through slixmpp (channel.py; chat ids and the way out send.py). This module is the channel's
declaration, found through the `chatfn.channels` entry point `xmpp`; it needs the `xmpp`
extra (slixmpp)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: XmppSettings) -> Any:
    from chatfn.channels.xmpp.channel import XmppChannel

    return XmppChannel(host, settings)


async def check(settings: XmppSettings, online: bool) -> list[Probe]:
    if (why := settings.problem()) is not None:
        return [Probe("fail", why)]
    where = settings.server or f"{settings.jid.split('@', 1)[1]} (DNS SRV)"
    probes = [Probe("ok", f"XMPP account {settings.jid} at {where}, {len(settings.rooms)} rooms")]
    if online:
        probes.append(await logs_in(settings))
    return probes


async def logs_in(settings: XmppSettings) -> Probe:
    """Connect and log in as `jid`, then disconnect: the password works, or why not."""
    import asyncio

    from chatfn.channels.xmpp.channel import make_client, session

    name = "channel xmpp login"
    client = make_client(settings.jid, settings.secret_text("password"), tls=settings.tls)
    try:
        async with asyncio.timeout(settings.connect_timeout):
            said = await session(client, settings.address())
    except TimeoutError:
        said = "unreachable: no session in time"
    finally:
        client.abort()
    if said == "refused":
        why = f"XMPP server refused channels.xmpp.password for {settings.jid}"
        return Probe("fail", why, name=name)
    if said != "ok":
        return Probe("fail", f"XMPP server not reachable ({said})", name=name)
    return Probe("ok", f"logged in as {settings.jid}", name=name)


SPEC = ChannelSpec(
    name="xmpp",
    settings=XmppSettings,
    factory=build,
    summary="XMPP (Jabber) accounts (chats and XEP-0045 rooms: slixmpp)",
    extra="xmpp",
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        groups=True,
        dms=True,
        mentions=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        connection=("long connection",),
    ),
)
