"""Every model request goes through `ask`: it streams when a channel shows streams, and puts
each request on record: a usage row (tokens as the provider reported them, latency, outcome),
the limits' counts, the metrics, and one DEBUG line for the request and one for the answer
(TRACE adds the bodies; configured secrets are masked by the log filter).

A request the provider refuses as longer than the model's context window is sent once more with
the history cut to fit (`conversation.fit_messages`); if that fails too, the error propagates and
the router tells the user plainly.

In native mode with tools offered, a call the model wrote as text becomes a native call
(text_calls.py): a whole answer is parsed once; a streamed one is parsed as it arrives, so the
call's markup never reaches the channel's stream. A copy of the bot's own turn note in an
answer is cut from the stream and from the answer (note_echo.py).

Local servers (issue 22): a server that reports no token counts (llama-cpp-python when
streaming) gets an estimate, marked `estimated` in the usage row and logged once per model, so
token limits still count; a stream that brings nothing is asked again unstreamed and the answer
still reaches the streaming client as events; after two such streams in a row the model is asked
unstreamed from then on (logged once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from function_calls import limits
from function_calls.conversation import estimate_message_tokens, estimate_tokens, fit_messages
from function_calls.journal import TurnJournal
from function_calls.note_echo import NoteEchoFilter, strip_note_echo
from function_calls.text_calls import NativeTextFilter, text_calls_as_native
from providers.base import ChatModel, accounting
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    StreamInterrupted,
    fails_over,
)
from providers.types import LLMResponse, Message, StreamEvent, ToolDefinition, Usage

if TYPE_CHECKING:
    from function_calls.context import MessageContext


# Usage writes of requests made outside a turn, kept referenced until they are done.
_background: set[asyncio.Future[None]] = set()
T = TypeVar("T")
# The finish reason of an answer the user stopped (`TurnState.stop`): its usage row says so.
STOPPED = "stopped"


def record_usage(
    ctx: MessageContext, row: dict[str, object], tokens: int, cost: float | None = None
) -> None:
    """A request's usage row and limit counts: in a turn, with the turn's next write
    (function_calls/journal.py); outside one (a plugin's job), written on its own, off the
    event loop."""
    counts = limits.request_counts(ctx, tokens, cost)
    journal = ctx.turn.journal
    if journal is not None:
        journal.add_usage([row])
        journal.add_counts(counts)
        return
    msg = ctx.message
    one = TurnJournal(ctx.turn.storage, msg.platform, msg.chat_id)
    one.add_usage([row])
    one.add_counts(counts)
    write = asyncio.ensure_future(one.write())
    _background.add(write)
    write.add_done_callback(_background.discard)
    write.add_done_callback(lambda f: f.cancelled() or f.exception())  # logged by write


def _body_text(messages: Sequence[Message], tools: Sequence[ToolDefinition] | None) -> str:
    body = {
        "messages": [asdict(m) for m in messages],
        "tools": [t.name for t in tools or ()],
    }
    return json.dumps(body, ensure_ascii=False, default=str)


def _budget(model: ChatModel, limit: int) -> int:
    """Tokens the prompt may take in a window of `limit`: the answer's room (the configured
    `max_tokens`, else a quarter) is kept free, and a tenth more for the estimate's error."""
    max_tokens = getattr(getattr(model, "cfg", None), "max_tokens", None)
    reserve = min(max_tokens or limit // 4, limit // 2)
    return int((limit - reserve) * 0.9)


async def ask(
    ctx: MessageContext,
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None = None,
    *,
    stream: bool = True,
) -> LLMResponse:
    """One model request for `ctx`, streamed to `ctx.turn.on_stream` when there is one (and
    `stream`), recorded whatever its outcome. Provider errors propagate after recording; a
    context-length error first costs one retry with the messages cut to fit.

    A model with a fallback chain (`models.<name>.fallback`) hands a request it failed to the
    next model of the chain, which gets the same conversation in its own protocol; each attempt
    is recorded against the model that made it. A model that failed rests for its `cooldown`
    (skipped by every chat), then is tried again. No hand-over for an error another model could
    not fix (`providers.errors.fails_over`), nor once part of an answer reached the chat."""
    chain = model.fallback
    if chain is None:
        return await _ask_fitted(ctx, model, messages, tools, stream=stream, shown=[])
    candidates = chain.candidates(model)
    if candidates[0] is not model:
        ctx.logger.debug(
            "model {} is resting after a failure: asking {}", model.name, candidates[0].name
        )
    for index, current in enumerate(candidates):
        shown: list[int] = []
        try:
            response = await _ask_fitted(ctx, current, messages, tools, stream=stream, shown=shown)
        except ProviderError as exc:
            if not fails_over(exc) or shown:
                raise
            chain.cooldowns.failed(current.name, chain.cooldown(current.name))
            if index == len(candidates) - 1:
                raise
            ctx.logger.debug(
                "model {} failed ({}: {}); the turn goes on with {}",
                current.name,
                type(exc).__name__,
                exc,
                candidates[index + 1].name,
            )
            if ctx.turn.metrics is not None:
                ctx.turn.metrics.model_fallbacks.labels(
                    current.name, candidates[index + 1].name
                ).inc()
            continue
        chain.cooldowns.succeeded(current.name)
        return response
    raise AssertionError("unreachable: the chain always holds the model itself")


async def _ask_fitted(
    ctx: MessageContext,
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
    *,
    stream: bool,
    shown: list[int],
) -> LLMResponse:
    """`_ask_once`, cut to the model's known window, and once more cut after a context-length
    error. `shown` gets an entry per event that reached the chat's stream."""
    if model.context_limit:
        messages = fit_messages(list(messages), _budget(model, model.context_limit))
    try:
        return await _ask_once(ctx, model, messages, tools, stream=stream, shown=shown)
    except ContextLengthExceeded as exc:
        if exc.limit:
            model.context_limit = exc.limit
            budget = _budget(model, exc.limit)
        else:  # the window is not stated: half of what was refused
            budget = estimate_message_tokens(list(messages)) // 2
        cut = fit_messages(list(messages), budget)
        if estimate_message_tokens(cut) >= estimate_message_tokens(list(messages)):
            raise  # nothing left to cut: the system prompt and tools alone do not fit
        ctx.logger.warning(
            "model {}: prompt too long ({}); retrying with {} of {} messages cut to ~{} tokens",
            model.name,
            exc,
            len(cut),
            len(messages),
            budget,
        )
        return await _ask_once(ctx, model, cut, tools, stream=stream, shown=shown)


async def _ask_once(
    ctx: MessageContext,
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
    *,
    stream: bool,
    shown: list[int],
) -> LLMResponse:
    if ctx.turn.stop is not None and ctx.turn.stop.is_set():
        return LLMResponse(content=None, finish_reason=STOPPED)  # stopped: no more requests
    ctx.turn.requests += 1
    # Lazy: serialising every message (dataclasses.asdict + JSON) for a byte count and a body
    # that are only logged at DEBUG/TRACE was ~0.4 ms of CPU per request at INFO.
    rounds = ctx.turn.requests
    ctx.logger.opt(lazy=True).debug(
        "model request {} ({}) round {}: {} messages, {} tools, {} bytes",
        lambda: model.name,
        lambda: model.model,
        lambda: rounds,
        lambda: len(messages),
        lambda: len(tools or ()),
        lambda: len(_body_text(messages, tools).encode()),
    )
    ctx.logger.opt(lazy=True).trace("model request body: {}", lambda: _body_text(messages, tools))
    wanted = stream and ctx.turn.on_stream is not None and model.capabilities.streaming
    streamed = wanted and not _LOCAL.streams_empty(model)
    started = time.perf_counter()
    response: LLMResponse | None = None
    outcome = "ok"
    text: list[str] = []  # what the channel's stream showed of the answer
    try:
        with accounting():  # the one way into a model the bot serves (providers.base)
            if streamed:
                got = await _unless_stopped(ctx, _stream(ctx, model, messages, tools, shown, text))
                response, streamed = got or (_stopped(ctx, model, text), True)
            else:
                whole = await _unless_stopped(ctx, _complete(model, messages, tools))
                response = whole or _stopped(ctx, model, text)
                if wanted and whole:  # the client streams, the model is asked whole: as events
                    await _replay(ctx, whole)
        return response
    except ProviderError as exc:
        outcome = type(exc).__name__
        raise
    except BaseException as exc:  # cancelled, deadline: still a request on record
        outcome = type(exc).__name__
        raise
    finally:
        latency = time.perf_counter() - started
        _record(ctx, model, response, outcome, latency, streamed, messages, tools)


async def _unless_stopped(ctx: MessageContext, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None when the turn's `stop` (TurnState) is set first: the request
    is then cancelled (a stream's connection closed) and what it showed is the answer."""
    stop = ctx.turn.stop
    if stop is None:
        return await work
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return None if task.cancelled() else task.result()


def _stopped(ctx: MessageContext, model: ChatModel, text: list[str]) -> LLMResponse:
    """The answer of a request the user stopped: the text shown so far, with no calls. Its
    usage is estimated (the provider reports none for a request cut off)."""
    ctx.logger.debug(
        "model {}: the reply was stopped after {} characters", model.name, len("".join(text))
    )
    return LLMResponse(content="".join(text) or None, finish_reason=STOPPED)


def _native(model: ChatModel, tools: Sequence[ToolDefinition] | None) -> bool:
    """Whether calls the model writes as text are looked for (native mode, tools offered)."""
    return bool(tools) and model.capabilities.native_tools is not False


async def _complete(
    model: ChatModel, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
) -> LLMResponse:
    response = await model.complete(messages, tools or None)
    if tools and _native(model, tools):
        response = text_calls_as_native(response, tools)
    return _without_note(response)


def _without_note(response: LLMResponse) -> LLMResponse:
    """The answer without a copy of the turn note (note_echo.py): neither shown nor stored."""
    if response.content and "Current time:" in response.content:
        return replace(response, content=strip_note_echo(response.content) or None)
    return response


async def _replay(ctx: MessageContext, response: LLMResponse) -> None:
    """A whole answer to a streaming client, as the events a stream would have brought."""
    assert ctx.turn.on_stream is not None
    if response.content:
        await ctx.turn.on_stream(StreamEvent(type="text", text=response.content))
    for index, call in enumerate(response.tool_calls):
        await ctx.turn.on_stream(StreamEvent(type="tool_call_start", index=index, tool_call=call))
        await ctx.turn.on_stream(StreamEvent(type="tool_call_end", index=index, tool_call=call))


async def _stream(
    ctx: MessageContext,
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
    progress: list[int],
    text: list[str],
) -> tuple[LLMResponse, bool]:
    """The answer, and whether it came streamed (False: the stream was empty and the answer
    was asked for again whole). `text` gets the answer's text as the channel was shown it."""
    assert ctx.turn.on_stream is not None
    final: LLMResponse | None = None
    received = False
    # Native mode: a call the model wrote as text is held back, never streamed (text_calls.py).
    calls_in_text = NativeTextFilter(tools) if tools and _native(model, tools) else None
    shown = _Shown(ctx, progress, text)
    try:
        async for event in model.stream(messages, tools or None):
            received = True
            if event.type == "done":
                final = event.response
            elif event.type != "thinking" or model.capabilities.show_thinking:
                # Reasoning reaches a channel only when models.<name>.thinking.show says so.
                for out in calls_in_text.feed(event) if calls_in_text else (event,):
                    await shown.send(out)
        if calls_in_text is not None:
            rest, final = calls_in_text.finish(final)
            for out in rest:
                await shown.send(out)
        await shown.flush()
    except StreamInterrupted as exc:
        if received:
            raise
        # HTTP 200 and not one chunk: seen from servers whose streaming is broken or proxied
        # badly; the same request without streaming usually works.
        _LOCAL.stream_was_empty(ctx, model, exc)
        response = await _complete(model, messages, tools)
        await _replay(ctx, response)
        return response, False
    if final is None:
        raise RuntimeError(f"model {model.name} stream ended without a final response")
    _LOCAL.stream_worked(model)
    return _without_note(final), True


class _Shown:
    """The stream as the channel sees it: text through the note-echo filter, which may hold
    a short tail back; that tail goes out before any other event, so the order holds."""

    __slots__ = ("ctx", "echo", "progress", "text")

    def __init__(self, ctx: MessageContext, progress: list[int], text: list[str]) -> None:
        self.ctx = ctx
        self.echo = NoteEchoFilter()
        # An entry per event the channel got: once one did, no other model may take over.
        self.progress = progress
        self.text = text  # the text the channel got (a stopped reply is that)

    async def send(self, event: StreamEvent) -> None:
        assert self.ctx.turn.on_stream is not None
        if event.type == "text":
            text = self.echo.feed(event.text)
            if text:
                self.progress.append(1)
                self.text.append(text)
                await self.ctx.turn.on_stream(replace(event, text=text))
            return
        await self.flush()
        self.progress.append(1)
        await self.ctx.turn.on_stream(event)

    async def flush(self) -> None:
        assert self.ctx.turn.on_stream is not None
        text = self.echo.finish()
        self.echo = NoteEchoFilter()
        if text:
            self.progress.append(1)
            self.text.append(text)
            await self.ctx.turn.on_stream(StreamEvent(type="text", text=text))


class _LocalServerState:
    """What the bot learns about a model at run time: whether its streams come back empty, and
    whether its server reports token counts (each said once in the log). Keyed by the model
    object, so a reloaded configuration starts afresh."""

    EMPTY_STREAMS_BEFORE_UNSTREAMED = 2

    def __init__(self) -> None:
        self._empty: weakref.WeakKeyDictionary[ChatModel, int] = weakref.WeakKeyDictionary()
        self._estimating: weakref.WeakSet[ChatModel] = weakref.WeakSet()

    def streams_empty(self, model: ChatModel) -> bool:
        return self._empty.get(model, 0) >= self.EMPTY_STREAMS_BEFORE_UNSTREAMED

    def stream_was_empty(self, ctx: MessageContext, model: ChatModel, exc: Exception) -> None:
        count = self._empty.get(model, 0) + 1
        self._empty[model] = count
        if count < self.EMPTY_STREAMS_BEFORE_UNSTREAMED:
            ctx.logger.warning(
                "model {} streamed nothing ({}); retrying unstreamed", model.name, exc
            )
        else:
            ctx.logger.warning(
                "model {} streamed nothing {} times in a row ({}); asking it unstreamed from now "
                "on (its answers still reach streaming clients, whole)",
                model.name,
                count,
                exc,
            )

    def stream_worked(self, model: ChatModel) -> None:
        self._empty.pop(model, None)

    def first_estimate(self, model: ChatModel) -> bool:
        """True once per model: the first time its usage had to be estimated."""
        if model in self._estimating:
            return False
        self._estimating.add(model)
        return True


_LOCAL = _LocalServerState()


def _estimated_usage(
    response: LLMResponse,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
) -> Usage:
    """Tokens counted locally (conversation.estimate_tokens: bytes / 3, rounded up per
    message), for a server that reported none: the prompt with the tool list, and the answer
    with its calls and reasoning."""
    prompt = estimate_message_tokens(list(messages))
    for tool in tools or ():
        prompt += estimate_tokens(tool.name + tool.description + json.dumps(tool.parameters))
    answer = (response.content or "") + "".join(
        c.name + (c.arguments or "") for c in response.tool_calls
    )
    answer += "".join(block.text for block in response.thinking)
    return Usage(input_tokens=prompt, output_tokens=estimate_tokens(answer))


def _record(
    ctx: MessageContext,
    model: ChatModel,
    response: LLMResponse | None,
    outcome: str,
    latency: float,
    streamed: bool,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
) -> None:
    usage = (response.usage if response else None) or Usage()
    estimated = response is not None and not (usage.input_tokens or usage.output_tokens)
    if estimated:
        assert response is not None
        usage = _estimated_usage(response, messages, tools)
        # A stopped request reports no tokens because it was cut off, not for its server.
        if response.finish_reason != STOPPED and _LOCAL.first_estimate(model):
            ctx.logger.warning(
                "model {}: the server reported no token counts (streaming: {}); usage rows and "
                "token limits use a local estimate (marked estimated)",
                model.name,
                streamed,
            )
    msg = ctx.message
    price = model.price
    cost = (
        price.cost(usage.input_tokens, usage.output_tokens, usage.cached_tokens)
        if price is not None
        else None
    )
    if response is not None:
        ctx.logger.debug(
            "model answer {}: {} in / {} out tokens ({} cached, {} reasoning), {:.0f} ms, "
            "finish {}, {} chars, calls [{}]",
            model.name,
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens,
            latency * 1000,
            response.finish_reason,
            len(response.content or ""),
            ", ".join(c.name for c in response.tool_calls),
        )
        answer = response
        ctx.logger.opt(lazy=True).trace(
            "model answer body: {}",
            lambda: json.dumps(asdict(answer.as_message()), ensure_ascii=False, default=str),
        )
    else:
        ctx.logger.debug("model answer {}: {} after {:.0f} ms", model.name, outcome, latency * 1000)
    try:
        row = dict(
            platform=msg.platform,
            chat_id=msg.chat_id,
            sender_id=msg.sender_id,
            message_id=msg.message_id,
            model_name=model.name,
            model_id=(response.model if response else None) or model.model,
            prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            latency_ms=latency * 1000,
            streamed=streamed,
            estimated=estimated,
            outcome=outcome,
            created_at=datetime.now(UTC),
            cost=cost,
            round=ctx.turn.requests,
            finish_reason=(response.finish_reason or None) if response else None,
        )
        record_usage(ctx, row, usage.input_tokens + usage.output_tokens, cost)
    except Exception as exc:  # the record must never take the reply down with it
        ctx.logger.error("usage row for {} not written: {}", model.name, exc)
    metrics = ctx.turn.metrics
    if metrics is not None:
        metrics.model_requests.labels(model.name, outcome).inc()
        metrics.model_latency.labels(model.name).observe(latency)
        if cost:
            metrics.model_cost.labels(model.name).inc(cost)
        for kind, n in (
            ("prompt", usage.input_tokens),
            ("completion", usage.output_tokens),
            ("cached", usage.cached_tokens),
            ("reasoning", usage.reasoning_tokens),
        ):
            if n:
                metrics.model_tokens.labels(model.name, kind).inc(n)
