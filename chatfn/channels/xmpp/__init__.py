"""The XMPP channel: a bot account in one-to-one chats and multi-user chat rooms (XEP-0045),
through slixmpp (channel.py; chat ids and the way out send.py). This module is the channel's
declaration, found through the `chatfn.channels` entry point `xmpp`; it needs the `xmpp`
extra (slixmpp)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.xmpp.settings import XmppSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: XmppSettings) -> Any:
    from chatfn.channels.xmpp.channel import XmppChannel

    return XmppChannel(host, settings)


def offline(settings: XmppSettings) -> list[Probe]:
    where = settings.server or f"{settings.jid.split('@', 1)[1]} (DNS SRV)"
    return [Probe("ok", f"XMPP account {settings.jid} at {where}, {len(settings.rooms)} rooms")]


#: Connect and log in as `jid`, then disconnect: the channel's own connect and close
#: (kit/probe.py). The password works, or why not.
logs_in = connects(build, "channel xmpp login")


check = checks(offline, logs_in)

SPEC = ChannelSpec(
    name="xmpp",
    settings=XmppSettings,
    factory=build,
    summary="XMPP (Jabber) accounts (chats and XEP-0045 rooms: slixmpp)",
    extra="xmpp",
    check=check,
    readme=readme(__file__),
    capabilities=replace(CHAT, replies=False, images_in=False, connection=("long connection",)),
)
