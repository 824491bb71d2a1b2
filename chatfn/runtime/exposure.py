"""The bot's functions offered to a program rather than a chat (an MCP client), as plain data.

Channels may not import `function_calls`; the MCP channel asks its host's `Exposure`
(`caller`, `functions_for`, `call_function`) and gets dicts back. A caller is an identity in a
chat: the same visibility and execution checks run as for a chat message from it, and calls
are audited like any other (source "mcp"). A function declared with `approval` waits for an
approver's answer (the console's approvals page) or returns refused, as a chat's call would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chatfn.common.config import CoreSettings
from chatfn.common.messages import IncomingMessage, OutgoingMessage
from function_calls.approvals import Approvals
from function_calls.context import MessageContext
from function_calls.executor import Execution, FunctionExecutor
from function_calls.permissions import refusal_reason
from function_calls.programs import ProgramCaller
from function_calls.registry import Registry
from function_calls.spec import FunctionSpec

#: Who an MCP client is: the identity a plugin declares (`@plugin.program_caller`; the mcp
#: built-in's `mcp.expose`), else the default. The old name stays for callers of this module.
Caller = ProgramCaller


def program_caller(settings: CoreSettings) -> ProgramCaller:
    """The identity a loaded plugin declares for programs (`@plugin.program_caller`, read from
    its own section: the mcp built-in's `mcp.expose`), asked of every plugin the settings were
    validated with, whether it runs or not (its section applies all the same); without one (a
    bot built without the built-ins) the defaults."""
    from chatfn.runtime.plugins import load_builtins

    loaded = getattr(settings, "plugins_loaded", None) or load_builtins()
    for plugin in loaded:
        found = plugin.plugin.program_caller_of(settings) if plugin.plugin is not None else None
        if found is not None:
            return found
    return ProgramCaller()


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
        why = f"not exposed to MCP clients ({caller.setting})" if caller.setting else ""
        hidden = Execution(name, "refused", None, why or "not exposed to MCP clients")
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
        """Who an MCP client is (`program_caller`): identity, chat, admin, function filter."""
        return program_caller(self._settings)

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
