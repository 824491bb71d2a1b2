"""The console channel: talk to the bot in a terminal, or pipe a conversation through it
(channel.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `console`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.console.settings import ConsoleSettings
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe

README = """\
### Console

`python bot.py` (the default channel). `@bot` in a line mentions the bot; `:group NAME` /
`:private` switch chats, `:join NAME` makes NAME join the group (a `member_joined` event),
`:admin on|off` acts as an admin. Settings: `channels.console.user` (your sender id) and
`prompt`.
"""


def build(host: ChannelHost, settings: ConsoleSettings) -> Any:
    from chatfn.channels.console.channel import ConsoleChannel

    return ConsoleChannel(host, settings)


async def check(settings: ConsoleSettings, online: bool) -> list[Probe]:
    return [Probe("ok", f"terminal as {settings.user!r}")]


SPEC = ChannelSpec(
    name="console",
    settings=ConsoleSettings,
    factory=build,
    summary="a terminal, or a conversation piped through stdin/stdout",
    check=check,
    readme=README,
    capabilities=Capabilities(dms=True, groups=True, connection=("local",)),
)
