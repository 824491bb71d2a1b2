"""The tool loop: ask the model, run the calls it makes, feed results back, until it answers.

Everything here is bounded, because the model is untrusted and may loop, repeat itself, name
functions it was not offered, or produce garbage arguments: max rounds, max calls per message, a
per-function retry budget, identical-call detection, a total deadline, and a cap on the size of
each tool result sent back.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from chatfn.common.config import FunctionCallSettings
from function_calls.approvals import Approvals, dump_turn
from function_calls.compaction import conversation
from function_calls.context import MessageContext
from function_calls.conversation import tools_tokens
from function_calls.executor import Execution, FunctionExecutor
from function_calls.model_calls import ask
from function_calls.spec import FunctionSpec
from providers.base import ChatModel
from providers.types import LLMResponse, Message, ToolCall, ToolDefinition


@dataclass(slots=True)
class LoopResult:
    """How a tool loop ended. `text` is the model's final answer, still to be delivered."""

    handled: bool
    text: str | None = None
    rounds: int = 0
    executions: list[Execution] = field(default_factory=list)
    # Why the loop stopped early: "max_rounds", "repeat", "deadline", "max_calls"; None if the
    # model finished or a function ended the turn.
    stopped: str | None = None
    delivered: int = 0  # function messages sent to the chat
    # `text` is the loop's own stop note, not the model's words: stored as a notice, so the
    # model never reads it back as something it said.
    notice: bool = False
    # Reasoning text of the rounds not yet attached to a delivered reply.
    thinking: list[str] = field(default_factory=list)
    # The ID of the approval a call of the last round waits for (function_calls/approvals.py):
    # the loop stopped there, and goes on when it is answered.
    held: str | None = None

    def take_thinking(self) -> str | None:
        """The pending reasoning, joined, for the reply about to be stored; then cleared, so
        each reply row holds the thinking that led to it and nothing is stored twice."""
        if not self.thinking:
            return None
        text = "\n\n".join(self.thinking)
        self.thinking.clear()
        return text


def tool_definitions(specs: Sequence[FunctionSpec]) -> list[ToolDefinition]:
    return [ToolDefinition(s.name, s.description, s.parameters_schema) for s in specs]


def _call_key(call: ToolCall) -> tuple[str, str]:
    try:
        canonical = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        canonical = call.arguments.strip()
    return call.name, canonical


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit} more characters]"


def _first_held(
    calls: list[ToolCall], executions: list[Execution]
) -> tuple[ToolCall, Execution] | None:
    """The round's first call held for approval (function_calls/approvals.py); any other held
    call of the round is not asked for: the model is told to call it again afterwards."""
    first: tuple[ToolCall, Execution] | None = None
    for call, ex in zip(calls, executions, strict=True):
        if ex.outcome != "held":
            continue
        if first is None:
            first = (call, ex)
        else:
            ex.model_text = (
                "Not run: another call of this round waits for approval; "
                "call it again once that one is answered."
            )
    return first


def _not_run(messages: list[Message], over: list[ToolCall]) -> None:
    """The calls past the message's budget: each gets its "not run" result."""
    for call in over:
        messages.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                name=call.name,
                content="Not run: too many calls in one message.",
                is_error=True,
            )
        )


class FunctionCallLLM:
    """The tool loop of a bot. The model is the message's (`ctx.model`, per chat), unless one
    is given here (tests drive a loop on a model of their own)."""

    def __init__(
        self,
        model: ChatModel | None,
        executor: FunctionExecutor,
        settings: FunctionCallSettings,
    ) -> None:
        self.model = model
        self.executor = executor
        self.settings = settings

    async def run(
        self,
        ctx: MessageContext,
        specs: Sequence[FunctionSpec],
        messages: list[Message] | None = None,
        *,
        deadline: float | None = None,
    ) -> LoopResult:
        """Run the loop until the model answers or a bound stops it. `deadline` (event-loop
        time) is the turn's: the caller runs what follows (the chat fallback) under the same."""
        if messages is None:
            messages = await conversation(ctx, reserve_tokens=tools_tokens(specs))
        result = LoopResult(handled=False)
        if deadline is None:
            deadline = asyncio.get_running_loop().time() + self.settings.total_timeout
        try:
            async with asyncio.timeout_at(deadline):
                await self._loop(ctx, list(specs), messages, result)
        except TimeoutError:
            result.stopped = "deadline"
            ctx.logger.warning("tool loop deadline of {} s reached", self.settings.total_timeout)
        if result.stopped and not result.text:
            result.text = ctx.t(f"core.stop.{result.stopped}")
            result.notice = True
        result.handled = result.handled or bool(result.text) or result.delivered > 0
        return result

    async def _loop(
        self,
        ctx: MessageContext,
        specs: list[FunctionSpec],
        messages: list[Message],
        result: LoopResult,
    ) -> None:
        s = self.settings
        seen: set[tuple[str, str]] = set()
        failures: Counter[str] = Counter()
        tools = tool_definitions(specs)
        first = len(messages)  # what the loop adds after the history: kept when a call is held
        for _ in range(s.max_rounds):
            result.rounds += 1
            response = await self._ask(ctx, messages, tools)
            for block in response.thinking:
                if block.text:
                    ctx.logger.debug("thinking: {}", block.text[:2000])
                    result.thinking.append(block.text)
            if not response.tool_calls:
                result.text = (response.content or "").strip() or None
                result.handled = result.text is not None or result.delivered > 0
                return
            calls = response.tool_calls
            keys = [_call_key(c) for c in calls]
            if any(k in seen for k in keys):
                ctx.logger.warning("identical call repeated: {}", [k[0] for k in keys if k in seen])
                result.stopped = "repeat"
                result.text = (response.content or "").strip() or None
                return
            seen.update(keys)
            budget_left = s.max_calls_per_message - len(result.executions)
            if budget_left <= 0:
                result.stopped = "max_calls"
                return
            messages.append(response.as_message())
            runnable, over = calls[:budget_left], calls[budget_left:]
            executions = await asyncio.gather(
                *(self.executor.execute(ctx, c.name, c.arguments) for c in runnable)
            )
            result.executions.extend(executions)
            wants_model = False
            held = _first_held(runnable, executions)
            for call, ex in zip(runnable, executions, strict=True):
                if held is not None and ex is held[1]:  # its result comes with its answer
                    continue
                text = ex.model_text
                if ex.ok and ex.result is not None:
                    for line, images in ex.result.replies():
                        await ctx.reply(
                            line, at=ex.result.at, thinking=result.take_thinking(), images=images
                        )
                        result.delivered += 1
                    if not ex.result.ends_turn:
                        wants_model = True
                else:
                    text, tools = self._failed(call, text, failures, tools)
                    wants_model = True
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        name=call.name,
                        content=_cap(text, s.max_result_chars),
                        is_error=not ex.ok,
                    )
                )
            _not_run(messages, over)
            if over:
                result.stopped = "max_calls"
                return
            if held is not None:
                await self._hold(ctx, specs, held, messages[first:], result)
                return
            if not wants_model:
                result.handled = True
                return
        result.stopped = "max_rounds"

    def _failed(
        self,
        call: ToolCall,
        text: str,
        failures: Counter[str],
        tools: list[ToolDefinition],
    ) -> tuple[str, list[ToolDefinition]]:
        """A failed call counted: past its retries, the model is told so and loses the tool."""
        failures[call.name] += 1
        if failures[call.name] > self.settings.retries_per_call:
            text += " No retries left: tell the user it failed."
            tools = [t for t in tools if t.name != call.name]
        return text, tools

    @staticmethod
    async def _hold(
        ctx: MessageContext,
        specs: list[FunctionSpec],
        held: tuple[ToolCall, Execution],
        tail: list[Message],
        result: LoopResult,
    ) -> None:
        """Stop the loop at a held call: the approval is asked for with what the loop added
        (the model's calls, the other results), so its answer resumes the loop here."""
        call, ex = held
        spec = next(s for s in specs if s.name == call.name)
        approvals = ctx.service(Approvals)
        assert approvals is not None  # the executor holds a call only when there is one
        request = await approvals.request(
            ctx, spec, ex.arguments or {}, source="llm", call_id=call.id, turn=dump_turn(tail)
        )
        result.held = request.id
        result.handled = True

    async def _ask(
        self, ctx: MessageContext, messages: list[Message], tools: list[ToolDefinition]
    ) -> LLMResponse:
        model = self.model or ctx.model
        if model is None:
            raise RuntimeError("the tool loop ran without a model")
        # A native-mode call written as text comes back as a call (model_calls, text_calls).
        return await ask(ctx, model, messages, tools)
