"""A plugin's admin console views: its JSON API under `/admin/api/`, its page (a JavaScript
module the console loads under `/admin/<name>`), the page's words, and its scope rule.

    async def listing(call: ConsoleCall) -> dict[str, Any]:
        rows = await plugin.database(call.host).run(my_rows, call.scope)  # only its chats
        return {"rows": rows}

    plugin = Plugin("tickets", console=[ConsoleView(
        "tickets",
        routes=[ConsoleRoute("GET", "tickets", listing)],
        page=Path(__file__).parent / "static" / "tickets.js",
        texts={"en": {"nav.tickets": "Tickets"}, "zh": {"nav.tickets": "工单"}},
    )])

The console (chatfn/runtime/console, chatfn/channels/http/admin) mounts every loaded plugin's
routes behind its sessions, CSRF header and audit, and lists the page in its navigation; the
built-in reminders' page is written this way (function_calls/builtins/reminders/console.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

Method = Literal["GET", "POST", "PATCH", "PUT", "DELETE"]


class ConsoleScope(Protocol):
    """The chats a console user may see (`admin.users.NAME.chats`): check a row with `allows`,
    or filter a query with `clause(platform_column, chat_id_column)`."""

    @property
    def limited(self) -> bool: ...

    def allows(self, platform: str, chat_id: str) -> bool: ...

    def clause(self, platform: Any, chat_id: Any) -> Any: ...


class ConsoleRefused(Exception):
    """What a console handler answers instead of its JSON: `status` and `{"error": message}`
    (`field`: the parameter it is about)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


Audit = Callable[[str, str | None, str | None, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class ConsoleCall:
    """One request to a plugin's console route."""

    host: Any  # the running bot, as a `PluginHost` (function_calls/plugin.py imports this module)
    scope: ConsoleScope
    user: str  # the console user
    address: str  # where the request came from (for the audit)
    query: Mapping[str, str]
    params: Mapping[str, str]  # the route's `{name}` parts
    body: Any  # the JSON body of a POST, PATCH, PUT or DELETE (None: none)
    _audit: Audit = field(repr=False)

    async def audit(
        self,
        action: str,
        platform: str | None = None,
        chat_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """One audit row for a change the user made (the console's audit page shows it)."""
        await self._audit(action, platform, chat_id, detail or {})

    def choice(self, name: str, allowed: Sequence[str], default: str) -> str:
        """A query parameter that must be one of `allowed` (a 400 naming it otherwise)."""
        value = self.query.get(name, default) or default
        if value not in allowed:
            raise ConsoleRefused(400, f"{name}: one of {', '.join(a for a in allowed if a)}", name)
        return value


ConsoleHandler = Callable[[ConsoleCall], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ConsoleRoute:
    """`method /admin/api/<path>` (`path` may hold `{name}` parts: `call.params`)."""

    method: Method
    path: str
    handler: ConsoleHandler


@dataclass(frozen=True)
class HealthList:
    """One list of the plugin's `@plugin.health` answer that the console draws, under a heading
    of its own in the overview's health panel and as a table on the plugins page: `key` is the
    answer's entry, a list of `{"name", "state", "detail", ...}`; `title` the text key of the
    heading; each item's state is a badge saying `t(states + state)`, good when the state is one
    of `good`; `columns`: more fields of an item the plugins page shows, each (field, text key).
    The words are the view's `texts`."""

    key: str
    title: str
    states: str = ""
    good: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ConsoleView:
    """One page of the console. `scope`: "chats" (every console user, the handler keeps to
    `call.scope`) or "unscoped" (only users without a `chats:` scope; others get a 403).
    `page`: the JavaScript module (`export async function render(view, ctx)`, importing the
    console's helpers from `/admin/static/js/`), served as `/admin/api/pages/<name>.js`;
    `texts`: the words it uses with `t(key)`, per language, `nav.<name>` its menu entry.
    `health`: the lists of the plugin's health answer the console draws (`HealthList`); a view
    may have only these (no page, no routes)."""

    name: str
    routes: Sequence[ConsoleRoute] = ()
    page: Path | None = None
    texts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    scope: Literal["chats", "unscoped"] = "chats"
    health: Sequence[HealthList] = ()
