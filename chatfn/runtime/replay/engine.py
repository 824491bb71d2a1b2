"""One recorded turn, asked again of a model (issue 40.5): the conversation as the bot built
it for that message (the chat's prompt, the history before it, the note with the time it
came), the functions the chat offered then, and a tool loop in which no function with effects
runs. A call the model makes is answered with what the bot recorded for the same function in
that turn (the result the model was told then); a function declared `pure=True` runs again,
off the record (`FunctionExecutor.rehearse`: no audit row); a call with effects the turn has
no result for is not run and the model is told so. Whatever a function or the model would
send goes into the report: the context's sink keeps it, no channel or outbox sees it.

The models are the bot's (`models:`), asked inside `providers.base.accounting()` as operator
tooling (`check_system.py --online` is another): the spend is in the report, not in the chat's
usage rows or limits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime.settings import Settings
from chatfn.storage.db import Storage
from chatfn.storage.replay import RecordedCall, RecordedTurn
from function_calls.context import MessageContext
from function_calls.conversation import build_messages, tools_tokens
from function_calls.executor import FunctionExecutor
from function_calls.llm import tool_definitions
from function_calls.permissions import refusal_reason, visible_functions
from function_calls.registry import Registry
from providers.base import ChatModel, accounting
from providers.errors import ProviderError
from providers.types import LLMResponse, Message, ToolCall

#: What the model is told for a call with effects the recorded turn has no result for.
NOT_RUN = (
    "[replay] {name} has effects and this turn recorded no result for it, so it was not run. "
    "Answer without it."
)


#: How a recorded result that went to the chat begins (`FunctionResult.content_for_model`).
SENT = "Sent to the user: "


class ReplayHost(Protocol):
    """What a replay reads of the bot (the `Bot` has these)."""

    settings: Settings
    storage: Storage
    registry: Registry

    async def context(
        self,
        msg: IncomingMessage,
        deliver: Callable[[OutgoingMessage], Awaitable[None]],
        *,
        stored_id: int | None = None,
    ) -> MessageContext: ...


@dataclass(slots=True)
class Call:
    """One function call of a side: what the model asked and how the replay answered it."""

    function: str
    arguments: Any
    # recorded: the turn's recorded result fed back; ran: a pure function run again;
    # not_run: effects, nothing recorded; refused / unknown / invalid: as the bot would say.
    how: str
    outcome: str
    result: str
    # What the function said to the chat (its `FunctionResult.messages`): part of the answer,
    # and, unless it asked for the model again, the end of the turn, as in the tool loop.
    sent: list[str] = field(default_factory=list)
    ends_turn: bool = False

    def json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "arguments": self.arguments,
            "how": self.how,
            "outcome": self.outcome,
            "result": self.result,
        }


@dataclass(slots=True)
class Side:
    """One answer to a turn: a model asked now, or what the bot recorded then."""

    model: str
    live: bool
    calls: list[Call] = field(default_factory=list)
    answer: str = ""
    refusals: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    rounds: int = 0
    latency_ms: float = 0.0
    error: str | None = None
    # What a pure function tried to send to the chat: kept here, never sent.
    withheld: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "live": self.live,
            "tools": [c.function for c in self.calls],
            "calls": [c.json() for c in self.calls],
            "answer": self.answer,
            "refusals": self.refusals,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "cost": None if self.cost is None else round(self.cost, 8),
            "rounds": self.rounds,
            "latency_ms": round(self.latency_ms, 1),
            "error": self.error,
            "withheld": self.withheld,
        }


def recorded_side(turn: RecordedTurn) -> Side:
    """The turn as the bot answered it then."""
    calls = [
        Call(c.function, c.arguments, "recorded", c.outcome, c.result)
        for c in turn.calls
        if c.source == "llm"
    ]
    return Side(
        model=", ".join(turn.models) or "recorded",
        live=False,
        calls=calls,
        answer="\n".join(turn.replies),
        refusals=[f"{c.function}: {c.result}" for c in calls if c.outcome == "refused"],
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
        cost=turn.cost,
        rounds=turn.requests,
    )


def canonical(arguments: Any) -> str:
    """Arguments compared as JSON with sorted keys (text that is not JSON: as it is)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return arguments.strip()
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


class Rehearsal:
    """Asks models a chat's recorded turns again; one per replay run."""

    def __init__(self, host: ReplayHost) -> None:
        self.host = host
        self.executor = FunctionExecutor(
            host.registry, default_timeout=host.settings.function_calls.call_timeout
        )
        self.max_rounds = host.settings.function_calls.max_rounds
        self.max_result_chars = host.settings.function_calls.max_result_chars

    async def ask(self, model: ChatModel, turn: RecordedTurn, persona: str | None = None) -> Side:
        """`turn` asked of `model` (with the persona of `personas:` named `persona` in place
        of the chat's prompt, when given)."""
        side = Side(model=model.name, live=True)
        started = time.perf_counter()
        try:
            await self._loop(model, turn, side, persona)
        except ProviderError as exc:
            side.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        side.latency_ms = (time.perf_counter() - started) * 1000
        return side

    async def _context(
        self, model: ChatModel, turn: RecordedTurn, side: Side, persona: str | None
    ) -> MessageContext:
        msg = IncomingMessage(
            platform=turn.platform,
            chat_id=turn.chat_id,
            sender_id=turn.sender_id,
            sender_name=turn.sender_name,
            text=turn.text,
            is_group=turn.is_group,
            is_at_bot=turn.is_at_bot,
            message_id=turn.message_id,
        )

        async def withhold(out: OutgoingMessage) -> None:  # nothing reaches a chat
            side.withheld.append(out.text)

        ctx = await self.host.context(msg, withhold, stored_id=turn.id)
        ctx.model = model
        if persona is not None:
            prompt = self.host.settings.personas[persona]
            ctx.chat = replace(ctx.chat, system_prompt=prompt, persona=persona)
        at = turn.created_at.timestamp()
        ctx.turn.clock = lambda: at  # the time note says when the message came, as it did then
        return ctx

    async def _loop(
        self, model: ChatModel, turn: RecordedTurn, side: Side, persona: str | None
    ) -> None:
        ctx = await self._context(model, turn, side, persona)
        specs = visible_functions(self.host.registry.all(), ctx)
        tools = tool_definitions(specs) or None
        messages = await build_messages(ctx, reserve_tokens=tools_tokens(specs))
        recorded = [c for c in turn.calls if c.source == "llm"]
        costs: list[float] = []
        said: list[str] = []  # what the functions said to the chat, in order
        for _ in range(self.max_rounds):
            with accounting():
                response = await model.complete(messages, tools)
            side.rounds += 1
            _account(model, response, side, costs)
            if not response.tool_calls:
                side.answer = "\n".join([*said, response.content or ""]).strip()
                break
            messages.append(response.as_message())
            wants_model = False
            for call in response.tool_calls:
                done = await self._call(ctx, call, recorded)
                side.calls.append(done)
                said += done.sent
                wants_model = wants_model or not done.ends_turn
                if done.outcome == "refused":
                    side.refusals.append(f"{done.function}: {done.result}")
                messages.append(
                    Message(
                        role="tool",
                        # Cut as the tool loop cuts a result (`function_calls.max_result_chars`).
                        content=_cap(done.result, self.max_result_chars),
                        tool_call_id=call.id,
                        name=call.name,
                        is_error=done.outcome != "ok",
                    )
                )
            if not wants_model:  # the functions answered: no model round to paraphrase them
                side.answer = "\n".join(said)
                break
        else:
            side.error = f"no answer within {self.max_rounds} rounds"
        side.cost = sum(costs) if costs else None

    async def _call(
        self, ctx: MessageContext, call: ToolCall, recorded: list[RecordedCall]
    ) -> Call:
        arguments = _parsed(call.arguments)
        spec = self.host.registry.get(call.name)
        if spec is not None and spec.pure:
            ran = await self.executor.rehearse(ctx, call.name, call.arguments)
            done = Call(call.name, arguments, "ran", ran.outcome, ran.model_text)
            if ran.ok and ran.result is not None:
                done.sent = [text for text, _ in ran.result.replies()]
                done.ends_turn = ran.result.ends_turn
            return done
        if spec is None:
            text = f"Unknown function {call.name!r}. Use only the functions you were given."
            return Call(call.name, arguments, "unknown", "unknown", text)
        reason = refusal_reason(spec, ctx)
        if reason is not None:
            text = f"Refused: {reason}. Do not retry; tell the user if relevant."
            return Call(call.name, arguments, "refused", "refused", text)
        found = _match(recorded, call.name, canonical(arguments))
        if found is None:
            return Call(call.name, arguments, "not_run", "not_run", NOT_RUN.format(name=call.name))
        recorded.remove(found)
        done = Call(call.name, arguments, "recorded", found.outcome, found.result)
        if found.outcome == "ok" and found.result.startswith(SENT):
            # It answered the chat itself (`content_for_model` of a result with messages) and,
            # by default, ended the turn there: so it does here.
            done.sent, done.ends_turn = [found.result.removeprefix(SENT)], True
        return done


def _account(model: ChatModel, response: LLMResponse, side: Side, costs: list[float]) -> None:
    """One request's tokens and cost (at the model's `price`), and a content filter's refusal."""
    usage = response.usage
    if usage is not None:
        side.prompt_tokens += usage.input_tokens
        side.completion_tokens += usage.output_tokens
        if model.price is not None:
            costs.append(
                model.price.cost(usage.input_tokens, usage.output_tokens, usage.cached_tokens)
            )
    if response.finish_reason == "content_filter":
        side.refusals.append("the provider's content filter")


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


def _match(recorded: list[RecordedCall], name: str, arguments: str) -> RecordedCall | None:
    """The recorded call of the same function with the same arguments, else the first of the
    same function (the model asked it slightly differently: the result is the nearest there
    is, and the report shows both argument sets)."""
    same = [c for c in recorded if c.function == name]
    for c in same:
        if canonical(c.arguments) == arguments:
            return c
    return same[0] if same else None
