"""The Discord channel (channel.py; discord.py pointed at `api_base`/`gateway_url`
client.py; chat ids, mentions, roles and reply parts message.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `discord`; it imports
no discord.py, so finding channels works without the extra."""

from __future__ import annotations

from typing import Any

from chatfn.channels.discord.settings import API_BASE, DiscordSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### Discord

`pip install "chatfn[discord]"`, then `python bot.py --channel discord`.

1. On https://discord.com/developers/applications create an application, open **Bot**,
   press **Reset Token** and put the token in `channels.discord.token`.
2. On the same **Bot** page, under *Privileged Gateway Intents*, switch on **Message Content
   Intent** (the bot reads what people write) and **Server Members Intent** (member joins ->
   the welcome; or set `member_events: false`). The bot identifies with the intents GUILDS,
   GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT and GUILD_MEMBERS; Discord closes the
   connection (code 4014) when a privileged one is not switched on, which the bot logs in
   one line.
3. **OAuth2 -> URL Generator**: scope `bot`, permissions View Channels, Send Messages, Send
   Messages in Threads, Attach Files, Embed Links, Read Message History; open the URL to add
   the bot to a server.

```yaml
channels:
  discord:
    token: "MTA...your bot token"
    # api_base: https://discord.com/api/v10   # Discord's (a proxy or a test server)
    # gateway_url: wss://gateway.discord.gg/
    # member_events: true                     # needs Server Members Intent
```

Chat ids: `guild:<guild id>/channel:<channel id>`, `guild:<guild id>/thread:<thread id>`
and `dm:<user id>` (Developer Mode -> right click -> Copy ID), so `match: {chat_id:
"guild:1234/*"}` matches one server; `bot.admins` lists user ids. In a server the bot answers
when mentioned (`@bot`, its role) or when someone replies to one of its messages
(`respond_in_groups`); DMs are always answered. With `bot.trust_group_admins`, the server's
owner and members whose roles give Administrator or Manage Server are that server's chat
admins. Other bots' messages are ignored. Long replies are split under 2000 characters;
Markdown arrives as Discord's; function images are uploaded as files. Settings:
`channels.discord.token`, `api_base`, `gateway_url`, `member_events`, `max_message_length`,
`guild_ready_timeout`. `check_system.py --online` asks `/users/@me`.
"""


def build(host: ChannelHost, settings: DiscordSettings) -> Any:
    from chatfn.channels.discord.channel import DiscordChannel

    return DiscordChannel(host, settings)


async def check(settings: DiscordSettings, online: bool) -> list[Probe]:
    if not settings.token:
        return [Probe("fail", "channels.discord.token is not set (the bot's token)")]
    where = "" if settings.api_base == API_BASE else f" at {settings.api_base}"
    probes = [Probe("ok", f"token set{where}")]
    if online:
        from chatfn.channels.discord.probe import who_am_i

        probes.append(await who_am_i(settings))
    return probes


SPEC = ChannelSpec(
    name="discord",
    settings=DiscordSettings,
    factory=build,
    summary="Discord guild channels, threads and DMs (discord.py, Gateway + REST)",
    extra="discord",
    modules=("discord",),
    check=check,
    readme=README,
)
