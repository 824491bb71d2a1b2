"""The admin console's side of the runtime: what the pages under `/admin/` read and change
(docs/admin-api.md), as JSON-ready dicts. The HTTP channel serves it (chatfn/channels/http/admin)
and reaches it as `host.console` only: the channel knows the web, this package the bot.

Every read goes to the database through `Storage.run` (chatfn/storage/console): the console reads
what the bot records anyway and computes nothing per message. Its writes are an operator's
changes (a chat's overrides, as the chat's admin commands write them; an outbox row retried;
what a plugin's console view changes, a reminder cancelled), each with an audit row, and its
own sessions.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatfn.common.config import AdminUser, CoreSettings
from chatfn.runtime.console import ops, setup, turns, views
from chatfn.runtime.console.chats import Chats
from chatfn.runtime.console.errors import ConsoleError
from chatfn.runtime.console.health import health, worker_exposition
from chatfn.runtime.console.lag import LagMonitor
from chatfn.runtime.console.logs import LEVELS, LogTail
from chatfn.storage.console import sessions as store
from chatfn.storage.console import stats
from chatfn.storage.console.scope import EVERYTHING, Scope
from chatfn.storage.console.sessions import SessionRow
from function_calls.console import ConsoleRoute, ConsoleView

if TYPE_CHECKING:
    from chatfn.runtime.console.bot_view import ConsoleBot as Bot  # the Bot, as a Protocol

__all__ = [
    "LEVELS",
    "Console",
    "ConsoleError",
    "ConsoleRoute",
    "ConsoleView",
    "Scope",
    "SessionRow",
]


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Console:
    """One per bot (made on first use by `BotChannelHost.console`)."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self.lag = LagMonitor()
        self.started_at = datetime.now(UTC)
        self._chats = Chats(self)
        self._plugins: Any = None  # the Plugins page (chatfn/runtime/console/plugins.py)
        self.logs = LogTail(bot.settings.logging.level)
        # Config keys `chatfn run`'s flags give (key path -> the flag, e.g. "--port 8080"): shown
        # as coming from the command line, not editable on the console's pages.
        self.command_line: dict[tuple[str, ...], str] = {}

    @property
    def settings(self) -> CoreSettings:
        return self._bot.settings

    @property
    def storage(self) -> Any:
        return self._bot.storage

    async def run(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """A storage function off the event loop, beside the turns (`Storage.run_aside`)."""
        return await self.storage.run_aside(fn, *args, **kwargs)

    # -- users and sessions --------------------------------------------------------------------
    def user(self, name: str) -> AdminUser | None:
        return self.settings.admin.users.get(name)

    def scope_of(self, name: str) -> Scope | None:
        """The chats `name` may see (None: no such user any more)."""
        user = self.user(name)
        if user is None:
            return None
        return Scope(tuple(user.chats)) if user.chats is not None else EVERYTHING

    async def open_session(self, user: str, token: str, csrf: str, address: str) -> datetime:
        hours = self.settings.admin.session_hours
        expires = datetime.now(UTC) + timedelta(hours=hours)
        await self.run(
            store.create_session,
            self.storage.engine,
            token_hash(token),
            user,
            csrf,
            address,
            expires,
        )
        return expires

    async def session(self, token: str) -> SessionRow | None:
        return await self.run(store.session, self.storage.engine, token_hash(token))

    async def end_session(self, token: str) -> None:
        await self.run(store.end_session, self.storage.engine, token_hash(token))

    # -- the first run (setup.py): no user yet, a one-time link makes the owner -------------
    def setup_needed(self) -> bool:
        return not self.settings.admin.users

    def setup_valid(self, token: str) -> bool:
        settings: Any = self.settings  # the runtime's Settings (its config file)
        return setup.valid(settings, token)

    def setup_link(self, port: int | None) -> str:
        settings: Any = self.settings
        return setup.link(settings, setup.base_url(settings, port))

    async def create_owner(self, name: str, password_hash: str, token: str) -> AdminUser:
        """The first user, role owner, written to config.yaml (ConsoleError when refused)."""
        settings: Any = self.settings
        return await asyncio.to_thread(setup.create_owner, settings, name, password_hash, token)

    @property
    def models_page(self) -> Any:
        """The Models page's reads and changes (models.py), owner-only changes."""
        from chatfn.runtime.console.models import ModelsPage

        return ModelsPage(self)

    @property
    def channels_page(self) -> Any:
        """The Channels page's reads, changes and probes (channels.py), owner-only changes."""
        from chatfn.runtime.console.channels import ChannelsPage

        return ChannelsPage(self)

    @property
    def channel_logins(self) -> Any:
        """The channels' logins started from the console (channel_login.py), one per channel."""
        from chatfn.runtime.console.channel_login import ChannelLogins

        logins = self.__dict__.get("_channel_logins")
        if logins is None:
            logins = self.__dict__["_channel_logins"] = ChannelLogins(self)
        return logins

    async def audit(
        self,
        user: str,
        address: str,
        action: str,
        platform: str = "",
        chat_id: str = "",
        detail: dict[str, Any] | None = None,
    ) -> None:
        await self.run(
            store.add_audit, self.storage.engine, user, address, action, platform, chat_id, detail
        )

    async def restart(self, user: str, address: str) -> dict[str, Any]:
        """Stop as on SIGTERM and run again (chatfn/runtime/restart.py); audited first, so the
        row is there whatever the restart does. Only `chatfn run` restarts: a bot another
        program embeds says it cannot."""
        restart = self._bot.restart
        if not restart.armed:
            raise ConsoleError(409, "this bot was not started by `chatfn run`: restart it there")
        await self.audit(user, address, "bot.restart")
        restart.request(user)
        return {"restarting": True}

    async def audit_page(
        self,
        scope: Scope,
        limit: int,
        before: int | None,
        chat: tuple[str, str] | None,
        user: str | None,
    ) -> dict[str, Any]:
        entries, nxt = await self.run(
            store.audit_page, self.storage.engine, scope, limit, before, chat, user
        )
        return {"entries": entries, "next_before": nxt}

    # -- pages ------------------------------------------------------------------------------------
    @property
    def chats(self) -> Chats:
        return self._chats

    async def overview(self, scope: Scope, days: int) -> dict[str, Any]:
        cut = ops.buckets(self._bot, days)
        found = await self.run(stats.overview, self.storage.engine, scope, cut)
        return {
            "days": days,
            "bucket": cut.kind,
            "since": store.iso(cut.since),
            "until": store.iso(cut.until),
            **found,
            "health": None if scope.limited else await health(self, self.started_at),
        }

    async def worker_metrics(self) -> str:
        """The workers' counters in the Prometheus text format (a gateway's /metrics)."""
        return await worker_exposition(self._bot)

    async def turn(
        self, scope: Scope, platform: str, chat_id: str, message_id: str
    ) -> dict[str, Any]:
        return await turns.turn(self, scope, platform, chat_id, message_id)

    async def replay(
        self, user: str, address: str, platform: str, chat_id: str, body: Any
    ) -> dict[str, Any]:
        """One chat's recorded turns asked again of another model (replay.py, issue 40.5)."""
        from chatfn.runtime.console.replay import replay_chat

        return await replay_chat(self, user, address, platform, chat_id, body)

    async def usage(self, scope: Scope, group_by: str, days: int) -> dict[str, Any]:
        return await ops.usage(self._bot, scope, group_by, days)

    usage_csv = staticmethod(ops.usage_csv)

    # -- the plugins' views (`Plugin(console=[ConsoleView(...)])`) ------------------------------
    def views(self) -> list[ConsoleView]:
        return views.views(self._bot)

    def pages(self) -> list[dict[str, Any]]:
        return views.pages(self._bot)

    def panels(self) -> list[dict[str, Any]]:
        return views.panels(self._bot)

    def page(self, name: str) -> Path | None:
        return views.page(self._bot, name)

    async def view_call(
        self,
        view: ConsoleView,
        route: ConsoleRoute,
        scope: Scope,
        user: str,
        address: str,
        query: Mapping[str, str],
        params: Mapping[str, str],
        body: Any,
    ) -> dict[str, Any]:
        return await views.call(self, view, route, scope, user, address, query, params, body)

    async def delivery(
        self,
        scope: Scope,
        state: str,
        platform: str,
        chat_id: str,
        limit: int,
        before: int | None,
    ) -> dict[str, Any]:
        return await ops.delivery(self._bot, scope, state, platform, chat_id, limit, before)

    async def retry(self, scope: Scope, user: str, address: str, event_id: int) -> dict[str, Any]:
        return await ops.retry(self, scope, user, address, event_id)

    def plugins(self) -> dict[str, Any]:
        return ops.plugins(self._bot)

    @property
    def plugin_page(self) -> Any:
        """The Plugins page's reads and changes (on/off, settings, the market)."""
        if self._plugins is None:
            from chatfn.runtime.console.plugins import Plugins

            self._plugins = Plugins(self)
        return self._plugins

    async def check(self, user: str, address: str, online: bool) -> dict[str, Any]:
        return await ops.check(self, user, address, online)

    def start(self) -> None:
        """Start what the console measures in the background (the event loop's lag) and the
        Logs page's backlog."""
        self.lag.start()
        self.logs.keep()

    async def stop(self) -> None:
        self.logs.stop()
        await self.lag.stop()

    def __repr__(self) -> str:
        return f"Console({len(self.settings.admin.users)} user(s))"
