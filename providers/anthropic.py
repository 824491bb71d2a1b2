"""Anthropic Messages API adapter: our vocabulary to `anthropic` SDK requests and back.

Everything Anthropic-specific lives here: `system` as a top-level field, tools as
`{name, description, input_schema}`, calls as `tool_use` blocks, results as `tool_result` blocks in
a user turn, thinking blocks that must be replayed verbatim with their signatures, and the raw
streaming events (`content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic

from providers.base import ServerModel
from providers.config import ModelConfig
from providers.errors import (
    MALFORMED_RESPONSE_ERRORS,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
    error_for_status,
)
from providers.schema import SchemaError, anthropic_input_schema
from providers.sdk_http import aiohttp_client
from providers.types import (
    LLMResponse,
    Message,
    StreamEvent,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    Usage,
)

log = logging.getLogger(__name__)

PROVIDER = "anthropic"
# The Messages API has no default for max_tokens: it is a required field.
DEFAULT_MAX_TOKENS = 4096
# Anthropic's stop reasons in the OpenAI-shaped vocabulary the tool loop reads.
# Text blocks separated by other blocks (a server tool, a call) are paragraphs, not one sentence.
TEXT_BLOCK_SEPARATOR = "\n\n"
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


class AnthropicModel(ServerModel):
    """A Claude model behind the Messages API (or any server speaking it, via `base_url`)."""

    provider = PROVIDER

    def __init__(self, name: str, cfg: ModelConfig) -> None:
        super().__init__(name, cfg.model, cfg.capabilities())
        self.cfg = cfg
        self.timeout = cfg.timeout  # bounds each whole request (ServerModel)
        extra: dict[str, Any] = {}
        if cfg.http_transport == "aiohttp":
            http_client = aiohttp_client("anthropic", cfg.timeout)
            if http_client is not None:
                extra["http_client"] = http_client
        self.client = anthropic.AsyncAnthropic(
            api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
            base_url=cfg.base_url,
            timeout=cfg.timeout,
            max_retries=cfg.max_retries,
            **extra,
        )
        client = self.client
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            # Otherwise the SDK raises a bare TypeError on every request; fail at start instead.
            raise ProviderAuthError(
                f"model {name!r}: no API key; set api_key in config or ANTHROPIC_API_KEY",
                provider=PROVIDER,
            )

    def endpoint(self) -> str:
        """The client's base URL (ANTHROPIC_BASE_URL or the SDK's default when unset)."""
        return str(self.client.base_url)

    async def aclose(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------------ requests

    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
    ) -> dict[str, Any]:
        """The keyword arguments of `messages.create`, minus `stream`."""
        system, turns = to_anthropic_messages(messages)
        thinking = self.cfg.thinking_config()
        max_tokens = self.cfg.max_tokens or DEFAULT_MAX_TOKENS
        request: dict[str, Any] = {"model": self.model, "messages": turns}
        if system:
            request["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
        if tools:
            try:
                request["tools"] = [
                    {
                        "name": t.name,
                        "description": t.description,
                        "input_schema": anthropic_input_schema(t.parameters),
                    }
                    for t in tools
                ]
            except SchemaError as exc:
                raise ProviderBadRequest(str(exc), provider=PROVIDER) from exc
            request["tools"][-1]["cache_control"] = _EPHEMERAL
            if self.cfg.tool_choice is not None:
                request["tool_choice"] = {"type": _TOOL_CHOICE[self.cfg.tool_choice]}
        mark_history_breakpoints(turns)
        if thinking.enabled and not _unsigned_tool_round(turns):
            request["thinking"] = {"type": "enabled", "budget_tokens": thinking.budget_tokens}
            # The API refuses budget_tokens >= max_tokens: the budget is part of the output.
            max_tokens = max(max_tokens, thinking.budget_tokens + DEFAULT_MAX_TOKENS)
        elif self.cfg.temperature is not None:
            # With thinking enabled the API only accepts the default temperature.
            request["temperature"] = self.cfg.temperature
        request["max_tokens"] = max_tokens
        return request

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        request = self.build_request(messages, tools)
        try:
            message = await self.client.messages.create(**request, stream=False)
            return from_anthropic_message(message)
        except anthropic.APIError as exc:
            raise map_error(exc) from exc
        except MALFORMED_RESPONSE_ERRORS as exc:  # not JSON, or not a Message (a proxy's page)
            raise ProviderError(f"malformed response: {exc!r}", provider=PROVIDER) from exc

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        request = self.build_request(messages, tools)
        assembler = _StreamAssembler()
        try:
            events = await self.client.messages.create(**request, stream=True)
            async with events:
                async for event in events:
                    for out in assembler.feed(event):
                        yield out
        except anthropic.APIError as exc:
            raise map_error(exc) from exc
        except (OSError, ValueError) as exc:
            raise StreamInterrupted(f"stream broke: {exc!r}", provider=PROVIDER) from exc
        except MALFORMED_RESPONSE_ERRORS as exc:  # an event whose fields have the wrong shape
            raise ProviderError(f"malformed stream event: {exc!r}", provider=PROVIDER) from exc
        except Exception as exc:
            # The SDK lets its HTTP library's transport errors (a connection reset mid-stream)
            # through unwrapped; a half-read answer must surface as our retryable error.
            if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "anyio"):
                raise StreamInterrupted(f"stream broke: {exc!r}", provider=PROVIDER) from exc
            raise
        yield StreamEvent(type="done", response=assembler.finish())


# ---------------------------------------------------------------------- our vocabulary -> wire

# Prompt caching (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): the
# Messages API caches nothing unless a block carries `cache_control`, and at most four blocks
# may. The request is laid out tools, system, messages; a breakpoint caches everything before
# it. We mark the tool list, the system prompt, the newest turn (the next request of the chat,
# or the tool loop's next round, starts with all of this one) and the turn before it (the
# history as the previous request ended, should the newest turn not repeat byte for byte).
_EPHEMERAL = {"type": "ephemeral"}
# `models.<name>.tool_choice` in the Messages API's words.
_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}
# Blocks that cannot carry cache_control themselves.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def mark_history_breakpoints(turns: list[dict[str, Any]]) -> None:
    """Put `cache_control` on the last markable block of the last two turns."""
    for turn in turns[-2:]:
        for block in reversed(turn["content"]):
            if block.get("type") not in _UNMARKABLE:
                block["cache_control"] = _EPHEMERAL
                break


def _unsigned_tool_round(turns: list[dict[str, Any]]) -> bool:
    """Whether the request continues a tool round whose calls carry no thinking block: one
    another model made (a fallback taking over mid tool loop). With thinking on, the API wants
    such a round to open with this model's signed thinking, and a tool loop keeps one thinking
    setting, so the request goes without thinking until the round is over."""
    if len(turns) < 2 or turns[-1]["role"] != "user" or turns[-2]["role"] != "assistant":
        return False
    blocks = turns[-2]["content"]
    if not any(b.get("type") == "tool_use" for b in blocks):
        return False
    return not any(b.get("type") in _UNMARKABLE for b in blocks)


# What the API accepts as a tool_use id (`tool_use.id` pattern).
_TOOL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def tool_id(raw: str | None) -> str:
    """A call id in the form the API accepts. Ids other providers made (a call another model
    made, now continued here) may hold other characters ("functions.weather:0"): those are
    rewritten, the same way for the call and its result, so they still pair up."""
    if raw and _TOOL_ID.fullmatch(raw):
        return raw
    digest = hashlib.sha256((raw or "").encode()).hexdigest()[:12]
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", raw or "")[:40]
    return f"toolu_{cleaned}_{digest}" if cleaned else f"toolu_{digest}"


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split out the system prompt and convert the turns to content-block messages.

    Consecutive turns of the same role are merged into one: the API wants user and assistant to
    alternate, and all results of one round of tool calls in a single user turn, before any text.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            if msg.content:
                system.append(msg.content)
            continue
        if msg.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(msg)
        elif msg.role == "tool":
            role, blocks = (
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id(msg.tool_call_id),
                        "content": msg.content or "",
                        "is_error": msg.is_error,
                    }
                ],
            )
        else:
            role = "user"
            # The API refuses empty text blocks.
            blocks = [{"type": "text", "text": msg.content}] if msg.content else []
            blocks += [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": img.mime_type, "data": img.base64()},
                }
                for img in msg.images
            ]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            if role == "user" and blocks[0]["type"] == "tool_result":
                # tool_result blocks must open the user turn that answers the tool_use turn.
                results = [b for b in previous if b["type"] == "tool_result"]
                others = [b for b in previous if b["type"] != "tool_result"]
                turns[-1]["content"] = results + blocks + others
            else:
                previous.extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def _assistant_blocks(msg: Message) -> list[dict[str, Any]]:
    """Thinking first (verbatim, in original order), then text, then tool_use.

    The API verifies each thinking block's signature and, during a tool loop, requires the
    thinking that preceded the tool_use to come back unchanged
    (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks).
    Thinking from another provider carries no valid signature and is dropped.
    """
    blocks: list[dict[str, Any]] = []
    for block in msg.thinking:
        if block.provider != PROVIDER:
            continue
        if block.redacted:
            blocks.append({"type": "redacted_thinking", "data": block.data or ""})
        elif block.signature:
            blocks.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature}
            )
    if msg.content:
        blocks.append({"type": "text", "text": msg.content})
    for call in msg.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id(call.id),
                "name": call.name,
                "input": _input_of(call),
            }
        )
    return blocks


def _input_of(call: ToolCall) -> dict[str, Any]:
    """tool_use.input must be an object; a call whose text was not one was already answered with
    a validation error, so an empty object keeps the transcript valid without inventing args."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return {}


# ---------------------------------------------------------------------- wire -> our vocabulary


def from_anthropic_message(message: Any) -> LLMResponse:
    """Convert a non-streamed `Message`."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlock] = []
    for block in message.content:
        kind = block.type
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=block.id,
                    name=block.name,
                    arguments=json.dumps(block.input, ensure_ascii=False),
                )
            )
        elif kind == "thinking":
            thinking.append(
                ThinkingBlock(text=block.thinking, signature=block.signature, provider=PROVIDER)
            )
        elif kind == "redacted_thinking":
            thinking.append(ThinkingBlock(redacted=True, data=block.data, provider=PROVIDER))
        else:  # server tools (web search, tool search) run at Anthropic; nothing for us to do
            log.debug("anthropic: ignoring %s block", kind)
    for block in thinking:
        log.debug(
            "anthropic thinking (%s): %s", "redacted" if block.redacted else "text", block.text
        )
    usage = message.usage
    return LLMResponse(
        content=TEXT_BLOCK_SEPARATOR.join(t for t in texts if t) or None,
        tool_calls=calls,
        thinking=thinking,
        finish_reason=_FINISH.get(message.stop_reason or "", message.stop_reason),
        usage=anthropic_usage(usage),
        model=message.model,
    )


def anthropic_usage(raw: Any, *, output: int | None = None) -> Usage:
    """Anthropic's `input_tokens` counts only the uncached part of the prompt; cache reads
    (`cache_read_input_tokens`) and writes (`cache_creation_input_tokens`) come on top. Our
    `input_tokens` is the whole prompt, so limits count what the prompt really was."""
    read = getattr(raw, "cache_read_input_tokens", None) or 0
    write = getattr(raw, "cache_creation_input_tokens", None) or 0
    return Usage(
        input_tokens=(getattr(raw, "input_tokens", None) or 0) + read + write,
        output_tokens=output if output is not None else (getattr(raw, "output_tokens", 0) or 0),
        cached_tokens=read,
        cache_write_tokens=write,
    )


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    data: str | None = None
    call: ToolCall | None = None
    call_index: int = 0
    done: bool = False


@dataclass
class _StreamAssembler:
    """Turns raw stream events into StreamEvents and the final LLMResponse.

    A tool call is announced at `content_block_start` and only reported complete at its
    `content_block_stop`; an answer without `message_stop` is StreamInterrupted, so a cut-off
    stream can never leave a half-written call looking finished.
    """

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    stop_reason: str | None = None
    stopped: bool = False
    calls: int = 0
    text_seen: bool = False  # a text block with content came before: separate the next one

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self.model = event.message.model
            self.usage = anthropic_usage(event.message.usage)
        elif kind == "content_block_start":
            return self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            block = self.blocks.get(event.index)
            if block is not None:
                block.done = True
                if block.call is not None:
                    block.call.arguments = "".join(block.text) or "{}"
                    return [
                        StreamEvent(
                            type="tool_call_end", index=block.call_index, tool_call=block.call
                        )
                    ]
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            if event.usage is not None:
                self.usage.output_tokens = event.usage.output_tokens or self.usage.output_tokens
                if getattr(event.usage, "input_tokens", None):
                    # message_delta carries cumulative counts on newer API versions.
                    self.usage = anthropic_usage(event.usage, output=self.usage.output_tokens)
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _start(self, index: int, content: Any) -> list[StreamEvent]:
        kind = content.type
        block = _Block(kind)
        self.blocks[index] = block
        if kind == "text" and content.text:
            return self._text(block, content.text)
        if kind == "thinking" and content.thinking:
            block.text.append(content.thinking)
            block.signature = content.signature or None
            return [StreamEvent(type="thinking", text=content.thinking)]
        if kind == "redacted_thinking":
            block.data = content.data
        elif kind == "tool_use":
            block.call = ToolCall(id=content.id, name=content.name, arguments="")
            block.call_index = self.calls
            self.calls += 1
            return [
                StreamEvent(
                    type="tool_call_start",
                    index=block.call_index,
                    tool_call=ToolCall(id=content.id, name=content.name, arguments=""),
                )
            ]
        return []

    def _text(self, block: _Block, text: str) -> list[StreamEvent]:
        if not text:
            return []
        events = []
        if not block.text and self.text_seen:
            events.append(StreamEvent(type="text", text=TEXT_BLOCK_SEPARATOR))
        block.text.append(text)
        self.text_seen = True
        events.append(StreamEvent(type="text", text=text))
        return events

    def _delta(self, index: int, delta: Any) -> list[StreamEvent]:
        block = self.blocks.get(index)
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta" and block.kind == "text":
            return self._text(block, delta.text)
        if kind == "thinking_delta":
            block.text.append(delta.thinking)
            return [StreamEvent(type="thinking", text=delta.thinking)] if delta.thinking else []
        if kind == "signature_delta":
            block.signature = (block.signature or "") + delta.signature
        elif kind == "input_json_delta" and block.call is not None:
            block.text.append(delta.partial_json)
            if delta.partial_json:
                return [
                    StreamEvent(
                        type="tool_call_delta", index=block.call_index, text=delta.partial_json
                    )
                ]
        return []

    def finish(self) -> LLMResponse:
        open_calls = [b.call.name for b in self.blocks.values() if b.call and not b.done]
        if open_calls:
            raise StreamInterrupted(
                f"stream ended inside tool call(s) {open_calls}", provider=PROVIDER
            )
        if not self.stopped:
            raise StreamInterrupted("stream ended before message_stop", provider=PROVIDER)
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[ThinkingBlock] = []
        for _, block in sorted(self.blocks.items()):
            if block.kind == "text" and block.text:
                texts.append("".join(block.text))
            elif block.kind == "thinking":
                thinking.append(
                    ThinkingBlock(
                        text="".join(block.text), signature=block.signature, provider=PROVIDER
                    )
                )
            elif block.kind == "redacted_thinking":
                thinking.append(ThinkingBlock(redacted=True, data=block.data, provider=PROVIDER))
            elif block.call is not None:
                calls.append(block.call)
        return LLMResponse(
            content=TEXT_BLOCK_SEPARATOR.join(t for t in texts if t) or None,
            tool_calls=calls,
            thinking=thinking,
            finish_reason=_FINISH.get(self.stop_reason or "", self.stop_reason),
            usage=self.usage,
            model=self.model,
        )


# ---------------------------------------------------------------------- errors


def map_error(exc: anthropic.APIError) -> ProviderError:
    """SDK exceptions in our vocabulary (the SDK has already retried what it retries)."""
    message = str(exc)
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderTimeout(message, provider=PROVIDER)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnavailable(message, provider=PROVIDER)
    status = getattr(exc, "status_code", None)
    if status is None or status < 400:
        # An `error` event inside a 200 stream (overloaded_error mid-answer) arrives as a status
        # error carrying the stream's 200; its body says what actually happened.
        body = getattr(exc, "body", None)
        kind = body.get("error", {}).get("type") if isinstance(body, dict) else None
        if kind in ("overloaded_error", "api_error"):
            return ProviderUnavailable(message, provider=PROVIDER)
        if kind == "rate_limit_error":
            return ProviderRateLimited(message, provider=PROVIDER)
        return StreamInterrupted(message, provider=PROVIDER)
    return error_for_status(status, message, PROVIDER)
