"""The plugins' parts of the console (`Plugin(console=[ConsoleView(...)])`, `@plugin.health`):
their routes called with the user's scope, an audit that writes the console's audit rows, and
a refusal as the console's error; their health merged into the health panel and plugins page.
Nothing here names a plugin: the reminders page is the reminders built-in's view."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger

from chatfn.runtime.console.errors import ConsoleError
from chatfn.storage.console.scope import Scope
from function_calls.console import ConsoleCall, ConsoleRefused, ConsoleRoute, ConsoleView
from function_calls.plugin import Plugin

if TYPE_CHECKING:
    from chatfn.runtime.console.bot_view import ConsoleBot as Bot  # the Bot, as a Protocol


def _plugins(bot: Bot) -> list[Plugin[Any]]:
    """The plugins whose views are shown: not one switched off (`plugins.disabled`, or the
    console's off: its pages leave the navigation, its routes answer 404 from the next
    request), nor a built-in `plugins.disabled` kept from being wired at start."""
    loaded = bot.settings.plugins_loaded or bot.plugins
    return [
        p.plugin
        for p in loaded
        if p.plugin is not None
        and not p.switched_off(bot.settings)
        and not bot.guard.held(p.name)
        and p.name not in bot.unwired
    ]


def views(bot: Bot) -> list[ConsoleView]:
    """Every loaded plugin's console views, in load order (a name taken twice: the first)."""
    found: dict[str, ConsoleView] = {}
    for plugin in _plugins(bot):
        for view in plugin.console:
            found.setdefault(view.name, view)
    return list(found.values())


def page(bot: Bot, name: str) -> Path | None:
    """The page module of the view `name` (None: no such view, or it has no page)."""
    view = next((v for v in views(bot) if v.name == name), None)
    return view.page if view is not None and view.page is not None else None


def pages(bot: Bot) -> list[dict[str, Any]]:
    """What the single-page app adds to its navigation: each view with a page, its module's
    address and its words."""
    return [
        {
            "name": v.name,
            "module": f"/admin/api/pages/{v.name}.js",
            "texts": {lang: dict(words) for lang, words in v.texts.items()},
        }
        for v in views(bot)
        if v.page is not None
    ]


async def call(
    console: Any,
    view: ConsoleView,
    route: ConsoleRoute,
    scope: Scope,
    user: str,
    address: str,
    query: Mapping[str, str],
    params: Mapping[str, str],
    body: Any,
) -> dict[str, Any]:
    """One request to a plugin's route, under the view's scope rule; 404 while its plugin is
    switched off (its routes stay mounted: the web server's are made once)."""
    if all(v is not view for v in views(console._bot)):
        raise ConsoleError(404, f"the {view.name} page is off: its plugin is switched off")
    if view.scope == "unscoped" and scope.limited:
        raise ConsoleError(403, "this page is for users without a chats: scope")

    async def audit(
        action: str, platform: str | None, chat_id: str | None, detail: dict[str, Any]
    ) -> None:
        await console.audit(user, address, action, platform or "", chat_id or "", detail)

    request = ConsoleCall(
        console._bot.plugin_host, scope, user, address, query, params, body, audit
    )
    try:
        return await route.handler(request)
    except ConsoleRefused as exc:
        raise ConsoleError(exc.status, exc.message, exc.field) from None


def health(bot: Bot, detail: bool) -> dict[str, Any]:
    """Each loaded plugin's `@plugin.health`, merged (the health panel: `detail` False)."""
    merged: dict[str, Any] = {}
    for plugin in _plugins(bot):
        merged.update(plugin.health_of(bot.plugin_host, detail))
    return merged


def panels(bot: Bot) -> list[dict[str, Any]]:
    """The lists of the plugins' health answers the console draws (`ConsoleView.health`), with
    their words: the overview's health panel and the plugins page draw each the same way, and
    name no plugin."""
    return [
        {
            "view": v.name,
            "key": panel.key,
            "title": panel.title,
            "states": panel.states,
            "good": list(panel.good),
            "columns": [list(c) for c in panel.columns],
            "texts": {lang: dict(words) for lang, words in v.texts.items()},
        }
        for v in views(bot)
        for panel in v.health
    ]


def chat_names(bot: Bot) -> dict[tuple[str, str], str]:
    """The names the plugins know for chats (`@plugin.chat_names`), merged in load order; run
    on a storage thread. A plugin whose names fail to read is left out, with a log line."""
    names: dict[tuple[str, str], str] = {}
    for plugin in _plugins(bot):
        try:
            names.update(plugin.names_of_chats(bot.plugin_host))
        except Exception:  # noqa: BLE001 - a plugin's failure leaves its names out, not the page
            logger.exception("plugin {}: its chat names could not be read", plugin.name)
    return names
