"""How a function asks a model: one door, counted like the chat's own turns.

Every model request a function makes, built-in or plugin, is on the same record as a turn's:
a `model_usage` row, the metrics, `/stats`, and the limits `model_calls_per_day` /
`tokens_per_day` / `cost_per_day` per user and per chat, checked before the request
(`limits.admit_call`; over one, `LimitReached` and nothing is asked). `messages_per_minute`
counts messages that reach a model, each once: a turn's message with the turn, a slash
command's (`/summary`, `/web_search`) at its first model request; a function's further
requests in the same message do not count it again.

- `ctx.ask_model(...)`: a model under `models:`, chosen as the chat's turns choose it (the
  chat's model, or a name); a thin wrapper over `model_calls.ask`, so fallback chains, context
  fitting and streaming apply unchanged.
- `ctx.model_request(name, model_id)`: a plugin's own model behind its own client (web_search's
  search API): the same check first, the same record after, with the tokens the plugin reports.

The models the bot serves refuse requests made around this (providers.base `guarded`), so the
door is the only way to them. The runtime hands `DOOR` to each MessageContext it builds
(`model_door=`): this module imports MessageContext, so context.py never imports it back.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime

from function_calls import limits, voice
from function_calls.context import MessageContext, ModelRequest
from function_calls.model_calls import ask, record_usage
from providers.errors import ProviderUnavailable
from providers.types import LLMResponse, Message, ToolDefinition


async def _admit(ctx: MessageContext) -> None:
    refusal = await limits.admit_call(ctx)
    if refusal is None:
        return
    ctx.logger.info("limit {} reached: a function's model request refused", refusal.limit)
    if ctx.turn.metrics is not None:
        ctx.turn.metrics.limit_refusals.labels(refusal.limit).inc()
    raise limits.LimitReached(refusal)


def _messages(prompt: str | Sequence[Message], system: str | None) -> list[Message]:
    if isinstance(prompt, str):
        messages = [Message(role="user", content=prompt)]
    else:
        messages = list(prompt)
    if system is not None:
        messages.insert(0, Message(role="system", content=system))
    return messages


async def ask_model(
    ctx: MessageContext,
    prompt: str | Sequence[Message],
    *,
    system: str | None = None,
    model: str | None = None,
    tools: Sequence[ToolDefinition] | None = None,
    stream: bool = False,
) -> LLMResponse:
    """`MessageContext.ask_model` (documented there)."""
    chosen = ctx.model if model is None else ctx.turn.model_named(model)
    if chosen is None:
        what = "no model is configured" if model is None else f"no model named {model!r}"
        raise ProviderUnavailable(what)
    await _admit(ctx)
    return await ask(ctx, chosen, _messages(prompt, system), tools, stream=stream)


@asynccontextmanager
async def model_request(
    ctx: MessageContext, name: str, model_id: str
) -> AsyncIterator[ModelRequest]:
    """`MessageContext.model_request` (documented there)."""
    await _admit(ctx)
    call = ModelRequest(name, model_id)
    started = time.perf_counter()
    outcome = "ok"
    try:
        yield call
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        _record(ctx, call, outcome, time.perf_counter() - started)


def _record(ctx: MessageContext, call: ModelRequest, outcome: str, latency: float) -> None:
    """The usage row, limit counts and metrics of a plugin's own request (as model_calls does
    for the configured models)."""
    msg = ctx.message
    try:
        row = dict(
            platform=msg.platform,
            chat_id=msg.chat_id,
            sender_id=msg.sender_id,
            message_id=msg.message_id,
            model_name=call.name,
            model_id=call.model_id,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            latency_ms=latency * 1000,
            streamed=False,
            outcome=outcome,
            created_at=datetime.now(UTC),
        )
        record_usage(ctx, row, call.prompt_tokens + call.completion_tokens)
    except Exception as exc:  # the record must never take the answer down with it
        ctx.logger.error("usage row for {} not written: {}", call.name, exc)
    metrics = ctx.turn.metrics
    if metrics is not None:
        metrics.model_requests.labels(call.name, outcome).inc()
        metrics.model_latency.labels(call.name).observe(latency)
        for kind, n in (("prompt", call.prompt_tokens), ("completion", call.completion_tokens)):
            if n:
                metrics.model_tokens.labels(call.name, kind).inc(n)


class _Door:
    """`ctx.ask_model` / `ctx.model_request` through this module (context.ModelDoor)."""

    async def ask_model(
        self,
        ctx: MessageContext,
        prompt: str | Sequence[Message],
        *,
        system: str | None,
        model: str | None,
        tools: Sequence[ToolDefinition] | None,
        stream: bool,
    ) -> LLMResponse:
        return await ask_model(ctx, prompt, system=system, model=model, tools=tools, stream=stream)

    def model_request(
        self, ctx: MessageContext, name: str, model_id: str
    ) -> AbstractAsyncContextManager[ModelRequest]:
        return model_request(ctx, name, model_id)

    def meter(
        self,
        ctx: MessageContext,
        name: str,
        model_id: str,
        latency: float,
        outcome: str,
        cost: float | None,
    ) -> None:
        """A spoken reply's usage row, as a transcription's (function_calls/voice.py):
        function_calls/speech.py cannot import that module (MessageContext imports speech)."""
        voice.meter(ctx, name, model_id, latency, outcome, cost)


#: What the runtime gives every MessageContext it builds.
DOOR = _Door()
