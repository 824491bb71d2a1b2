"""Gemini adapter (generateContent / streamGenerateContent): our vocabulary to `google-genai`.

Everything Gemini-specific lives here: `system_instruction`, `functionDeclarations` with the
rewritten schema, `functionCall` parts without ids (we generate them), `thoughtSignature`s that
must travel back on the very part they came on, `functionResponse` parts carrying `result` or
`error`, and streams that deliver each call whole in one chunk.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from providers.base import ServerModel
from providers.config import ModelConfig
from providers.errors import (
    MALFORMED_RESPONSE_ERRORS,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
    error_for_status,
)
from providers.schema import SchemaError, gemini_parameters
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

PROVIDER = "gemini"
SIGNATURE = "thought_signature"  # key in ToolCall.provider_data (standard base64 text)
# https://ai.google.dev/gemini-api/docs/thought-signatures: the value to send on a function call
# that no Gemini model made (a conversation moved from another model), which skips validation.
FOREIGN_SIGNATURE = b"skip_thought_signature_validator"
ORIGIN = "origin"  # key in ToolCall.provider_data: "gemini" on an unsigned call Gemini made
# `models.<name>.tool_choice` as function_calling_config modes.
_TOOL_MODE = {
    "auto": types.FunctionCallingConfigMode.AUTO,
    "required": types.FunctionCallingConfigMode.ANY,
    "none": types.FunctionCallingConfigMode.NONE,
}
_DEFAULT_URL = "https://generativelanguage.googleapis.com/"
_FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}


class GeminiModel(ServerModel):
    """A Gemini model behind the Gemini API (or any server speaking it, via `base_url`)."""

    provider = PROVIDER
    #: Back-off of the SDK's retries, in seconds: it ignores Retry-After, so tests shrink these.
    retry_initial_delay: float = 1.0
    retry_jitter: float = 1.0

    def __init__(self, name: str, cfg: ModelConfig) -> None:
        super().__init__(name, cfg.model, cfg.capabilities())
        self.cfg = cfg
        self.timeout = cfg.timeout  # bounds each whole request (ServerModel)
        options = types.HttpOptions(
            base_url=cfg.base_url,
            # Function-call ids and thought signatures are v1beta features; with a custom
            # base_url the SDK would otherwise pick v1.
            api_version="v1beta",
            timeout=int(cfg.timeout * 1000),  # the SDK counts milliseconds
            # Without retry_options the SDK never retries; attempts include the first call.
            retry_options=types.HttpRetryOptions(
                attempts=cfg.max_retries + 1,
                initial_delay=self.retry_initial_delay,
                jitter=self.retry_jitter,
                max_delay=30.0,
            ),
        )
        try:
            self.client = genai.Client(
                api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
                http_options=options,
            )
        except ValueError as exc:  # no key in config nor in GEMINI_API_KEY / GOOGLE_API_KEY
            raise ProviderAuthError(f"gemini model {name!r}: {exc}", provider=PROVIDER) from exc

    def endpoint(self) -> str:
        """The base URL the SDK sends to (its default, or GOOGLE_GEMINI_BASE_URL, when the
        config has none). The SDK has no public accessor for it: read defensively."""
        options = getattr(getattr(self.client, "_api_client", None), "_http_options", None)
        return str(getattr(options, "base_url", None) or self.cfg.base_url or _DEFAULT_URL)

    async def aclose(self) -> None:
        await self.client.aio.aclose()

    # ------------------------------------------------------------------ requests

    def build_config(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
    ) -> tuple[list[types.Content], types.GenerateContentConfig]:
        system, contents = to_gemini_contents(messages)
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=self.cfg.temperature,
            max_output_tokens=self.cfg.max_tokens,
            # We run the tools ourselves; the SDK must never try to call Python functions.
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        if tools:
            try:
                declarations = [_declaration(t) for t in tools]
            except SchemaError as exc:
                raise ProviderBadRequest(str(exc), provider=PROVIDER) from exc
            config.tools = [types.Tool(function_declarations=declarations)]
            if self.cfg.tool_choice is not None:
                config.tool_config = types.ToolConfig(
                    function_calling_config=types.FunctionCallingConfig(
                        mode=_TOOL_MODE[self.cfg.tool_choice]
                    )
                )
        thinking = self.cfg.thinking_config()
        if thinking.enabled:
            config.thinking_config = types.ThinkingConfig(
                include_thoughts=True, thinking_budget=thinking.budget_tokens
            )
        return contents, config

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        contents, config = self.build_config(messages, tools)
        try:
            response = await self.client.aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except genai_errors.APIError as exc:
            raise map_error(exc) from exc
        except TimeoutError as exc:
            raise ProviderTimeout(str(exc) or "timed out", provider=PROVIDER) from exc
        except OSError as exc:
            raise ProviderUnavailable(str(exc), provider=PROVIDER) from exc
        except MALFORMED_RESPONSE_ERRORS as exc:  # the SDK could not decode the body
            raise ProviderError(f"malformed response: {exc!r}", provider=PROVIDER) from exc
        assembler = _Assembler()
        assembler.feed(response)
        return assembler.finish(streamed=False)

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        contents, config = self.build_config(messages, tools)
        assembler = _Assembler()
        try:
            chunks = await self.client.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=config
            )
            async for chunk in chunks:
                for event in assembler.feed(chunk):
                    yield event
        except genai_errors.APIError as exc:
            raise map_error(exc) from exc
        except TimeoutError as exc:
            raise ProviderTimeout(str(exc) or "timed out", provider=PROVIDER) from exc
        except Exception as exc:
            # The SDK lets transport errors of its HTTP library (aiohttp's payload errors, a
            # connection reset mid-stream) through unwrapped: a half-read answer is retryable.
            if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
                "aiohttp",
                "httpx",
                "httpx2",
                "httpcore",
            ):
                raise StreamInterrupted(f"stream broke: {exc!r}", provider=PROVIDER) from exc
            if isinstance(exc, MALFORMED_RESPONSE_ERRORS):  # a chunk the SDK could not decode
                raise ProviderError(f"malformed stream chunk: {exc!r}", provider=PROVIDER) from exc
            raise
        yield StreamEvent(type="done", response=assembler.finish(streamed=True))


# ---------------------------------------------------------------------- our vocabulary -> wire


def _declaration(tool: ToolDefinition) -> types.FunctionDeclaration:
    params = _parameters(tool)
    return types.FunctionDeclaration(
        name=tool.name,
        description=tool.description,
        parameters=None if params is None else types.Schema.model_validate(params),
    )


def _parameters(tool: ToolDefinition) -> dict[str, Any] | None:
    """A declaration's `parameters`, or None for a function without arguments: the field is
    optional (https://ai.google.dev/api/caching#FunctionDeclaration), google-genai's own
    `FunctionDeclaration.from_callable` leaves it out for such a function, and an empty object
    schema would be resent, for nothing, with every request."""
    params = gemini_parameters(tool.parameters)
    if not params.get("properties") and params.keys() <= {"type", "properties"}:
        return None
    return params


def to_gemini_contents(messages: Sequence[Message]) -> tuple[str, list[types.Content]]:
    """Split out the system instruction and convert the turns to `Content`s.

    Consecutive turns of one role are merged: Gemini wants all function responses of a round in
    the single user turn that follows the model turn holding the calls.
    """
    system: list[str] = []
    contents: list[types.Content] = []
    names: dict[str, str] = {}  # call id -> function name, for results missing Message.name
    for msg in messages:
        if msg.role == "system":
            if msg.content:
                system.append(msg.content)
            continue
        if msg.role == "assistant":
            role, parts = "model", _model_parts(msg)
            names.update({c.id: c.name for c in msg.tool_calls})
        elif msg.role == "tool":
            key = "error" if msg.is_error else "result"
            role, parts = (
                "user",
                [
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=msg.tool_call_id,
                            name=msg.name or names.get(msg.tool_call_id or "", ""),
                            response={key: msg.content or ""},
                        )
                    )
                ],
            )
        else:
            # An empty user turn stays: with only a system instruction, Gemini still needs a
            # user turn to answer (it refuses empty `contents`), and accepts an empty text part.
            role, parts = "user", [types.Part(text=msg.content or "")]
            parts += [
                types.Part(inline_data=types.Blob(mime_type=img.mime_type, data=img.data))
                for img in msg.images
            ]
        if not parts:
            continue
        if contents and contents[-1].role == role:
            contents[-1].parts = [*(contents[-1].parts or []), *parts]
        else:
            contents.append(types.Content(role=role, parts=parts))
    return "\n\n".join(system), contents


def _model_parts(msg: Message) -> list[types.Part]:
    """Replay a model turn with every signature on the part it came on.

    Gemini validates thought signatures of the current turn's function calls and answers 400
    without them (https://ai.google.dev/gemini-api/docs/thought-signatures); the first call of
    a parallel set carries it, the others none, so they are stored per call.
    """
    parts: list[types.Part] = []
    text_signature: bytes | None = None
    for block in msg.thinking:
        if block.provider != PROVIDER:
            continue
        if block.text:
            parts.append(
                types.Part(
                    text=block.text, thought=True, thought_signature=_decode(block.signature)
                )
            )
        elif block.signature:  # a signature that came on a plain text part
            text_signature = _decode(block.signature)
    if msg.content:
        parts.append(types.Part(text=msg.content, thought_signature=text_signature))
    # Calls another model made (a fallback continuing its tool loop) have no signature; the
    # first call of a turn must carry one, and the documented stand-in for a conversation
    # moved from another model is this placeholder.
    foreign = bool(msg.tool_calls) and not any(
        (c.provider_data or {}).get(SIGNATURE) or (c.provider_data or {}).get(ORIGIN)
        for c in msg.tool_calls
    )
    for index, call in enumerate(msg.tool_calls):
        try:
            args = call.parsed_arguments()
        except ValueError:
            args = {}  # already answered with a validation error; keep the turn well-formed
        signature = _decode((call.provider_data or {}).get(SIGNATURE))
        if foreign and index == 0:
            signature = FOREIGN_SIGNATURE
        parts.append(
            types.Part(
                function_call=types.FunctionCall(id=call.id, name=call.name, args=args),
                thought_signature=signature,
            )
        )
    return parts


def _decode(signature: str | None) -> bytes | None:
    return base64.b64decode(signature) if signature else None


def _encode(signature: bytes | None) -> str | None:
    return base64.b64encode(signature).decode("ascii") if signature else None


# ---------------------------------------------------------------------- wire -> our vocabulary


@dataclass
class _Assembler:
    """Accumulates responses (one, or the chunks of a stream) into events and an LLMResponse.

    Gemini streams each functionCall whole, so a call is started and ended in the same chunk;
    a stream is complete only once a chunk carries a finishReason.
    """

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    text_signature: str | None = None
    finish_raw: str | None = None
    usage: Usage | None = None
    model: str | None = None
    blocked: str | None = None
    _calls_seen: bool = False

    def feed(self, response: types.GenerateContentResponse) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self.model = response.model_version or self.model
        if response.usage_metadata is not None:
            meta = response.usage_metadata
            self.usage = Usage(
                input_tokens=meta.prompt_token_count or 0,
                # Thinking tokens are billed as output.
                output_tokens=(meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0),
                cached_tokens=meta.cached_content_token_count or 0,
                reasoning_tokens=meta.thoughts_token_count or 0,
            )
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason:
            self.blocked = str(feedback.block_reason)
        if not response.candidates:
            return events
        candidate = response.candidates[0]
        for part in (candidate.content.parts if candidate.content else None) or []:
            events.extend(self._part(part))
        if candidate.finish_reason is not None:
            reason = candidate.finish_reason
            self.finish_raw = getattr(reason, "value", str(reason))
        return events

    def _unsigned(self) -> dict[str, Any] | None:
        """An unsigned call (Gemini 2.x without thinking): the first of its turn is marked as
        Gemini's own, so a replay does not take it for another model's call (FOREIGN)."""
        first = not self._calls_seen
        self._calls_seen = True
        return {ORIGIN: PROVIDER} if first else None

    def _part(self, part: types.Part) -> list[StreamEvent]:
        signature = _encode(part.thought_signature)
        if part.function_call is not None and signature:
            self._calls_seen = True
        if part.function_call is not None:
            fc = part.function_call
            call = ToolCall(
                # Gemini API calls carry no id; generate one, stable for the rest of the turn.
                id=fc.id or f"call_{uuid.uuid4().hex[:24]}",
                name=fc.name or "",
                arguments=json.dumps(fc.args or {}, ensure_ascii=False),
                provider_data={SIGNATURE: signature} if signature else self._unsigned(),
            )
            index = len(self.calls)
            self.calls.append(call)
            return [
                StreamEvent(type="tool_call_start", index=index, tool_call=call),
                StreamEvent(type="tool_call_end", index=index, tool_call=call),
            ]
        if part.thought and part.text is not None:
            if self.thinking and not self.thinking[-1].signature:
                self.thinking[-1].text += part.text  # streamed thought continues
                self.thinking[-1].signature = signature
            else:
                self.thinking.append(
                    ThinkingBlock(text=part.text, signature=signature, provider=PROVIDER)
                )
            log.debug("gemini thinking: %s", part.text)
            return [StreamEvent(type="thinking", text=part.text)] if part.text else []
        if signature:
            self.text_signature = signature
        if part.text:
            self.texts.append(part.text)
            return [StreamEvent(type="text", text=part.text)]
        return []

    def finish_reason(self) -> str | None:
        if self.blocked:
            return "content_filter"
        if self.finish_raw in (None, "STOP"):
            return "tool_calls" if self.calls else ("stop" if self.finish_raw else None)
        if self.finish_raw == "MAX_TOKENS":
            return "length"
        if self.finish_raw in _FILTERED:
            return "content_filter"
        return self.finish_raw.lower()

    def finish(self, *, streamed: bool) -> LLMResponse:
        if streamed and self.finish_raw is None and not self.blocked:
            raise StreamInterrupted("stream ended without a finishReason", provider=PROVIDER)
        thinking = list(self.thinking)
        if self.text_signature:
            thinking.append(ThinkingBlock(signature=self.text_signature, provider=PROVIDER))
        return LLMResponse(
            content="".join(self.texts) or None,
            tool_calls=list(self.calls),
            thinking=thinking,
            finish_reason=self.finish_reason(),
            usage=self.usage,
            model=self.model,
        )


# ---------------------------------------------------------------------- errors


def map_error(exc: genai_errors.APIError) -> ProviderError:
    """google.genai errors in our vocabulary (after the SDK's own retries)."""
    code = exc.code
    message = f"{code} {exc.status}: {exc.message}" if exc.message else str(exc)
    if code == 400 and "API key not valid" in (exc.message or ""):
        # Gemini answers a wrong key with 400 INVALID_ARGUMENT, not 401.
        return ProviderAuthError(message, status=code, provider=PROVIDER)
    if code is None:
        return ProviderBadRequest(message, provider=PROVIDER)
    return error_for_status(code, message, PROVIDER)
