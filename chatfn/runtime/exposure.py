"""The bot's functions offered to a program rather than a chat (an MCP client), as plain data.

Channels may not import `function_calls`; the MCP channel asks its host's `Exposure`
(`caller`, `functions_for`, `call_function`) and gets dicts back. A caller is an identity in a
chat: the same visibility and execution checks run as for a chat message from it, and calls
are audited like any other (source "mcp"). A function declared with `approval` waits for an
approver's answer (the console's approvals page) or returns refused, as a chat's call would.
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from chatfn.common.config import CoreSettings
from chatfn.common.messages import IncomingMessage, OutgoingMessage
from function_calls.approvals import Approvals
from function_calls.context import MessageContext
from function_calls.executor import Execution, FunctionExecutor
from function_calls.permissions import refusal_reason
from function_calls.registry import Registry
from function_calls.spec import FunctionSpec

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls, where, and which function names they may see at all (glob patterns; an empty
    `include` means every function)."""

    user_id: str
    chat_id: str
    admin: bool = False
    platform: str = "mcp"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def may_see(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

    def message(self) -> IncomingMessage:
        return IncomingMessage(
            platform=self.platform,
            chat_id=self.chat_id,
            sender_id=self.user_id,
            sender_name=self.user_id,
            text="",
            is_at_bot=True,
            message_id=f"{self.platform}-{next(_ids)}",
            admin_override=self.admin,
        )


def mcp_caller(settings: CoreSettings) -> Caller:
    """The identity of `mcp.expose`. The section is the mcp built-in's (its settings model
    declares it); the runtime reads it by name and shape rather than importing the built-in,
    and without it (a bot built without the built-ins) the section's defaults apply."""
    expose = getattr(getattr(settings, "mcp", None), "expose", None)
    if expose is None:
        return Caller(user_id="mcp-client", chat_id="mcp")
    return Caller(
        user_id=expose.as_user,
        chat_id=expose.chat_id,
        admin=expose.admin,
        include=tuple(expose.functions.include),
        exclude=tuple(expose.functions.exclude),
    )


def describe(spec: FunctionSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters_schema,
    }


def visible(registry: Registry, caller: Caller, ctx: MessageContext) -> list[FunctionSpec]:
    """What `caller` may list: the filter, then the permission rules (as for a command)."""
    return [
        s
        for s in registry.all()
        if caller.may_see(s.name) and refusal_reason(s, ctx, via_command=True) is None
    ]


async def call(
    executor: FunctionExecutor,
    caller: Caller,
    ctx: MessageContext,
    sent: list[OutgoingMessage],
    name: str,
    arguments: dict[str, Any],
) -> dict[str, Any]:
    """Run one function as `caller`; returns {"ok", "outcome", "texts", "metadata"}: the texts
    are what the function sent (its messages, then `llm_content` when it adds something)."""
    if not caller.may_see(name):
        # Audited as refused; the client hears "unknown", as for a name that does not exist,
        # so a hidden function's existence is not revealed.
        hidden = Execution(name, "refused", None, "not exposed to MCP clients (mcp.expose)")
        await executor.audit(ctx, hidden, arguments, source="mcp")
        return {
            "ok": False,
            "outcome": "unknown",
            "texts": [f"Unknown function {name!r}."],
            "metadata": {},
        }
    ex = await executor.execute(ctx, name, arguments, source="mcp")
    if ex.outcome == "held":  # an `approval` function: wait for the answer, or refuse
        ex = await _approved(executor, ctx, sent, ex)
    if not ex.ok or ex.result is None:
        return {
            "ok": False,
            "outcome": ex.outcome,
            "texts": [ex.reason or ex.model_text],
            "metadata": ex.result.metadata if ex.result is not None else {},
        }
    result = ex.result
    texts = [m.text for m in sent] + list(result.messages)
    if result.llm_content is not None and result.llm_content not in texts:
        texts.append(result.llm_content)
    if not texts:
        texts.append(result.content_for_model())
    return {"ok": True, "outcome": "ok", "texts": texts, "metadata": result.metadata}


async def _approved(
    executor: FunctionExecutor, ctx: MessageContext, sent: list[OutgoingMessage], ex: Execution
) -> Execution:
    """An MCP call of an `approval` function (function_calls/approvals.py): asked for (the
    console lists it), then the call waits for the answer; approved, it runs with the
    arguments it was asked with; denied or expired, it returns refused and why."""
    approvals = ctx.service(Approvals)
    spec = executor.registry.get(ex.name)
    if approvals is None or spec is None:
        return Execution(ex.name, "refused", None, "Refused: no approvals here.")
    held = await approvals.request(ctx, spec, ex.arguments or {}, source="mcp")
    sent.clear()  # the request itself is the chat's, not the call's result
    decision = await approvals.wait(held)
    if decision == "approved":
        return await executor.execute(ctx, ex.name, held.arguments, source="mcp", approved=True)
    fresh = await approvals.get(held.id)
    why = f": {fresh.reason}" if fresh is not None and fresh.reason else ""
    text = f"Refused: approval {held.id} of {ex.name} was {decision}{why}."
    return Execution(ex.name, "refused", None, text, reason=text)


Sink = Callable[[OutgoingMessage], Awaitable[None]]
# The context of a message, with its chat's overrides read off the event loop (Bot.context).
ContextFor = Callable[[IncomingMessage, Sink], Awaitable[MessageContext]]


async def _discard(_out: OutgoingMessage) -> None:
    return None


class Exposure:
    """The bot's functions as a service to programs (the MCP channels), beside the Bot: the
    same visibility and execution checks as a chat's, the same audit rows."""

    def __init__(
        self,
        settings: CoreSettings,
        registry: Registry,
        executor: FunctionExecutor,
        context_for: ContextFor,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._executor = executor
        self._context_for = context_for

    def caller(self) -> Caller:
        """Who an MCP client is (`mcp.expose`): identity, chat, admin, function filter."""
        return mcp_caller(self._settings)

    async def functions_for(self, caller: Caller) -> list[dict[str, Any]]:
        """The functions `caller` may use, as {"name", "description", "input_schema"}."""
        ctx = await self._context_for(caller.message(), _discard)
        return [describe(s) for s in visible(self._registry, caller, ctx)]

    async def call_function(
        self, caller: Caller, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """Run `name` as `caller` with the same checks and audit row as a chat's call; returns
        {"ok", "outcome", "texts", "metadata"}."""
        sent: list[OutgoingMessage] = []

        async def collect(out: OutgoingMessage) -> None:
            sent.append(out)

        ctx = await self._context_for(caller.message(), collect)
        return await call(self._executor, caller, ctx, sent, name, arguments)
