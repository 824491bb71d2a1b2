"""`check_system.py --online` for Discord, beside the channel's own login (`connects`, in
__init__.py): the application's privileged-intent flags (`GET /applications/@me`), which the
login does not show (switched off, the Gateway refuses the bot only once it connects: close
code 4014)."""

from __future__ import annotations

import aiohttp
import discord

from chatfn.channels.discord.client import make_client
from chatfn.channels.discord.settings import DiscordSettings
from chatfn.runtime.channel_host import Probe

# Application flags (discord.com/developers/docs/resources/application#application-object-
# application-flags): the privileged intents switched on in the portal.
_MEMBERS = (1 << 14) | (1 << 15)
_CONTENT = (1 << 18) | (1 << 19)


async def intents(settings: DiscordSettings) -> Probe:
    """The privileged intents the channel asks for, switched on or not (run once the login
    worked: the application is read with the bot's token)."""
    name = "channel discord /applications/@me"
    client = make_client(settings)
    try:
        await client.login(settings.token or "")
        app = await client.http.application_info()
    except (discord.LoginFailure, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        return Probe(
            "warn", f"privileged intents not read (GET /applications/@me: {exc})", name=name
        )
    finally:
        await client.close()
    flags = int(app.get("flags") or 0)
    missing = [] if flags & _CONTENT else ["Message Content Intent"]
    if settings.member_events and not flags & _MEMBERS:
        missing.append("Server Members Intent")
    if missing:
        return Probe(
            "fail",
            f"{' and '.join(missing)} not switched on (developer portal -> Bot -> Privileged "
            "Gateway Intents)",
            name=name,
        )
    return Probe("ok", "the privileged intents the channel asks for are switched on", name=name)
