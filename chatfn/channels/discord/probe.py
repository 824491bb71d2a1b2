"""`check_system.py --online` for Discord: `GET /users/@me` (discord.py's login) and the
application's privileged-intent flags (`GET /applications/@me`)."""

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


async def who_am_i(settings: DiscordSettings) -> Probe:
    client = make_client(settings)
    try:
        await client.login(settings.token or "")
        user = client.user
        missing = []
        try:
            app = await client.http.application_info()
            flags = int(app.get("flags") or 0)
            if not flags & _CONTENT:
                missing.append("Message Content Intent")
            if settings.member_events and not flags & _MEMBERS:
                missing.append("Server Members Intent")
        except discord.HTTPException:
            pass
        if missing:
            return Probe(
                "fail",
                f"logged in as {user} but {' and '.join(missing)} not switched on (developer "
                "portal -> Bot -> Privileged Gateway Intents)",
            )
        return Probe("ok", f"logged in as {user} ({user.id if user else '?'})")
    except discord.LoginFailure:
        return Probe("fail", "Discord refused channels.discord.token (401 at /users/@me)")
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        return Probe("fail", f"Discord API not reachable at {settings.api_base}: {exc}")
    finally:
        await client.close()
