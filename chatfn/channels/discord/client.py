"""discord.py's `Client`, pointed at `channels.discord.api_base` and `gateway_url`.

discord.py has no per-client setting for either: REST URLs are built from the class attribute
`discord.http.Route.BASE` (the one discord.py's own `_set_api_version` rewrites) and a plain
`Client` connects to `DiscordWebSocket.DEFAULT_GATEWAY` (`wss://gateway.discord.gg/`; after
READY it resumes at READY's `resume_gateway_url`). Setting those class attributes would move
every client in the process, so instead `DiscordClient._get_state` (the hook discord.py's own
`AutoShardedClient` overrides to install its state) gives this client an `HTTPClient`
subclass that rewrites the two prefixes on the way out: `request()` swaps `Route.BASE` for
`api_base`, `ws_connect()` swaps the default gateway for `gateway_url` (the query discord.py
adds, `?v=10&encoding=json&compress=zlib-stream`, is kept). Everything else, rate-limit
buckets and 429 retries included, is discord.py's own code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import discord
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route

Handler = Callable[..., Awaitable[None]]


class RoutedHTTP(HTTPClient):
    """discord.py's HTTP client with its REST root and default gateway replaced."""

    def __init__(self, *args: Any, api_base: str, gateway_url: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.api_base = api_base.rstrip("/")
        self.gateway_url = gateway_url

    async def request(self, route: Route, **kwargs: Any) -> Any:
        base = Route.BASE
        if self.api_base != base and route.url.startswith(base):
            route.url = self.api_base + route.url[len(base) :]
        return await super().request(route, **kwargs)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        default = str(DiscordWebSocket.DEFAULT_GATEWAY)
        if url.startswith(default):
            url = self.gateway_url + url[len(default) :]
        return await super().ws_connect(url, compress=compress)


class DiscordClient(discord.Client):
    """A discord.py client whose events go to `handlers` (event name -> coroutine)."""

    def __init__(
        self,
        *,
        api_base: str,
        gateway_url: str,
        handlers: dict[str, Handler] | None = None,
        **options: Any,
    ) -> None:
        self._routes = (api_base, gateway_url)
        # The channel never joins voice: no start-up warnings about voice libraries.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        self._handlers_of_chatfn = handlers or {}
        super().__init__(**options)
        for name, handler in self._handlers_of_chatfn.items():
            setattr(self, f"on_{name}", handler)

    def _get_state(self, **options: Any) -> Any:
        old = self.http
        api_base, gateway_url = self._routes
        self.http = RoutedHTTP(
            old.loop,
            old.connector or None,
            proxy=old.proxy,
            proxy_auth=old.proxy_auth,
            unsync_clock=not old.use_clock,
            http_trace=old.http_trace,
            max_ratelimit_timeout=old.max_ratelimit_timeout,
            api_base=api_base,
            gateway_url=gateway_url,
        )
        return super()._get_state(**options)


def make_client(settings: Any, handlers: dict[str, Handler] | None = None) -> DiscordClient:
    """A client for `settings` (DiscordSettings): no member chunking or member cache (a bot in
    large guilds must not hold every member), no message cache (replies carry what they quote).
    Its intents are what the channel reads, nothing more: GUILDS, GUILD_MESSAGES,
    DIRECT_MESSAGES, MESSAGE_CONTENT (privileged) and, for member joins, GUILD_MEMBERS
    (privileged; `member_events`); the flags not named are off."""
    wanted = {"guilds": True, "guild_messages": True, "dm_messages": True}
    return DiscordClient(
        api_base=settings.api_base,
        gateway_url=settings.gateway_url,
        handlers=handlers,
        intents=discord.Intents(**wanted, message_content=True, members=settings.member_events),
        chunk_guilds_at_startup=False,
        member_cache_flags=discord.MemberCacheFlags.none(),
        max_messages=None,
        guild_ready_timeout=settings.guild_ready_timeout,
        allowed_mentions=discord.AllowedMentions.none(),
    )
