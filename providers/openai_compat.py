"""OpenAI Chat Completions, and every endpoint that copies it, through the `openai` SDK.

One adapter serves OpenAI, DeepSeek, Qwen/DashScope, Moonshot, Groq, Ollama, vLLM, LM Studio and
Gemini's OpenAI-compatible endpoint. It converts our vocabulary (providers.types) to the Chat
Completions wire format and back, and owns nothing else.

Why `client.post(..., cast_to=object)` instead of `client.chat.completions.create(...)`: this
adapter is on the hot path of the benchmark against the raw SDK. `create()` walks every message
through the SDK's TypedDict transformer and builds a pydantic model tree for every response and
every stream chunk; we need neither, because we convert to our own dataclasses anyway. `post` is
the SDK's documented way to make a request it has no typed method for, and keeps everything we
want from the SDK: auth headers, retries with `retry-after`, timeouts, SSE decoding and its
exception types. Requests and responses are therefore plain dicts here. From the second
request on, a client this adapter made posts through `providers/openai_light.py`, which keeps
all of that but makes the SDK's per-request set-up once.

The SDK itself (about 18 MB and 0.5 s: `import openai` loads all of its API types) is imported
when the first request is made, or earlier by `prepare` (which the bot runs in a thread once
its channels answer), not when the model is built: a bot's start-up does not wait for it. The
API key is checked when the model is built, so a missing one is still a start-up error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from providers.base import ServerModel, prompt_cache_key
from providers.config import ModelConfig, is_openai_host
from providers.errors import (
    MALFORMED_RESPONSE_ERRORS,
    ProviderAuthError,
    ProviderError,
    StreamInterrupted,
)
from providers.openai_errors import map_openai_error
from providers.openai_light import LightPost
from providers.schema import openai_parameters, openai_plain_parameters
from providers.types import (
    LLMResponse,
    Message,
    NativeTools,
    StreamEvent,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    Usage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

PROVIDER = "openai"
log = logging.getLogger(__name__)

# `stream_options: {"include_usage": true}` is sent on every streamed request: usage is on record
# only when asked for, and vLLM, Ollama, LM Studio and most gateways accept it. An older server
# answering 400 naming `stream_options` gets the request again without it, and the model stops
# asking (`stream`).

# ThinkingBlock.provider values this adapter produced, and so may replay as `reasoning_content`.
_COMPAT_THINKING = frozenset({"openai", "deepseek"})


@cache
def _stream_cls() -> Any:
    from openai import AsyncStream

    return AsyncStream[object]


# OpenAI's reasoning models take `reasoning_effort` (o1, o3, o4-mini, gpt-5...); other chat models
# answer 400 to it. Matched on the model id, with an optional gateway prefix ("openai/o3-mini").
_OPENAI_REASONING_MODEL = re.compile(r"(^|/)(o\d|gpt-5)")
# DeepSeek's own thinking model: it always thinks, and the `thinking` toggle is not for it.
_DEEPSEEK_ALWAYS_THINKS = ("deepseek-reasoner",)


def new_call_id() -> str:
    """An id for a call the server sent without one. It is stored on our ToolCall, so the
    assistant turn and the tool result replayed on the next request carry the same id."""
    return "call_" + uuid.uuid4().hex[:24]


class OpenAICompatModel(ServerModel):
    """A model behind a Chat Completions endpoint.

    `OpenAICompatModel(name, cfg, *, native_tools=None, stream_usage=None, client=None)`:
    `native_tools` is the effective setting the factory chose (it only lands in `capabilities`:
    this adapter sends `tools` whenever it is given some); `stream_usage` forces
    `stream_options.include_usage` on or off (default: on, dropped if the server refuses it);
    `client` injects a shared `AsyncOpenAI` (then `aclose` leaves it open).
    """

    provider = PROVIDER

    def __init__(
        self,
        name: str,
        cfg: ModelConfig,
        *,
        native_tools: NativeTools | None = None,
        stream_usage: bool | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None
        openai_itself = is_openai_host(base_url)
        if native_tools is None:
            native_tools = True if openai_itself else "auto"
        super().__init__(name, cfg.model, cfg.capabilities(default_native=native_tools))
        self.cfg = cfg
        self.timeout = cfg.timeout  # bounds each whole request (ServerModel)
        self.base_url = base_url
        self._openai_itself = openai_itself
        host = (urlsplit(base_url).hostname or "") if base_url else "api.openai.com"
        self._stream_usage = True if stream_usage is None else stream_usage
        # DeepSeek's reasoning_content is the same field other servers (vLLM, Qwen) use; the
        # provider tag only tells a reader where a block came from.
        self._thinking_provider = (
            "deepseek" if "deepseek" in host or cfg.model.startswith("deepseek") else PROVIDER
        )
        # OpenAI's reasoning models (o-series, gpt-5) refuse `max_tokens` and want
        # `max_completion_tokens`; most compatible servers know only `max_tokens`.
        self._max_tokens_key = "max_completion_tokens" if openai_itself else "max_tokens"
        self._strict = openai_itself if cfg.strict_tools is None else cfg.strict_tools
        # `prompt_cache_key` (https://platform.openai.com/docs/guides/prompt-caching) improves
        # cache hits for requests sharing a prefix; compatible servers may refuse unknown fields.
        self._send_cache_key = openai_itself
        # (name, description, id(parameters)) -> (parameters, wire tool): the tool loop passes
        # the same schema dicts every round and the strict rewrite deep-copies, so do it once.
        self._tool_cache: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, Any]]] = {}
        self._thinking_params = thinking_params(cfg, deepseek=self._thinking_provider == "deepseek")
        self._owns_client = client is None
        self._sdk_client = client
        # The HTTP client this adapter gave the SDK (None: the SDK's own, or a client passed
        # in), and the light poster made on it after the first request (providers/openai_light).
        self._http_client: Any = None
        self._light: LightPost | None = None
        self._light_made = False
        self._client_kwargs: dict[str, Any] = (
            {} if client else self._client_args(name, cfg, base_url, openai_itself)
        )

    @property
    def _client(self) -> AsyncOpenAI:
        """The SDK client, made (and the SDK imported) on first use."""
        if self._sdk_client is None:
            from openai import AsyncOpenAI

            kwargs = dict(self._client_kwargs)
            if self.cfg.http_transport == "aiohttp":
                from providers.sdk_http import aiohttp_client

                http_client = aiohttp_client("openai", kwargs["timeout"])
                if http_client is not None:
                    kwargs["http_client"] = self._http_client = http_client
            self._sdk_client = AsyncOpenAI(**kwargs)
        return self._sdk_client

    def endpoint(self) -> str:
        """The client's base URL (an injected client's own, OPENAI_BASE_URL included)."""
        return str(self._client.base_url)

    def prepare(self) -> None:
        """Import the SDK and make the client now (the bot calls it in a thread after start)."""
        self._client  # noqa: B018 - made for its side effect

    @staticmethod
    def _client_args(
        name: str, cfg: ModelConfig, base_url: str | None, openai_itself: bool
    ) -> dict[str, Any]:
        key = cfg.api_key.get_secret_value() if cfg.api_key else os.environ.get("OPENAI_API_KEY")
        if not key:
            if openai_itself:
                raise ProviderAuthError(
                    f"model {name!r}: no API key; set api_key in config or OPENAI_API_KEY",
                    provider=PROVIDER,
                )
            # Local servers (Ollama, vLLM, LM Studio) ignore the key, but the SDK demands one.
            key = "not-needed"
        return {
            "api_key": key,
            "base_url": base_url,
            "timeout": cfg.timeout,
            "max_retries": cfg.max_retries,
        }

    async def aclose(self) -> None:
        if self._owns_client and self._sdk_client is not None:
            await self._sdk_client.close()

    # -- requests ---------------------------------------------------------------------------

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None, stream: bool
    ) -> dict[str, Any]:
        # Key order is byte order on the wire: everything that stays the same for a chat first,
        # the messages (newest last) at the end, so consecutive requests share a long prefix.
        body: dict[str, Any] = {"model": self.model}
        cfg = self.cfg
        if tools:
            body["tools"] = [self._wire_tool(t) for t in tools]
            if cfg.tool_choice is not None:
                body["tool_choice"] = cfg.tool_choice
        if cfg.temperature is not None:
            body["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            body[self._max_tokens_key] = cfg.max_tokens
        if self._thinking_params:
            body.update(self._thinking_params)
        if self._send_cache_key and (key := prompt_cache_key.get()) is not None:
            body["prompt_cache_key"] = key
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        body["messages"] = to_wire_messages(messages, empty_content=not self._openai_itself)
        return body

    def _wire_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        if not self._strict:
            return to_wire_tool(tool)
        key = (tool.name, tool.description, id(tool.parameters))
        cached = self._tool_cache.get(key)
        if cached is not None and cached[0] is tool.parameters:
            return cached[1]
        if len(self._tool_cache) > 512:  # plugins reloaded many times: start over
            self._tool_cache.clear()
        wire = to_wire_tool(tool, strict=True)
        self._tool_cache[key] = (tool.parameters, wire)
        return wire

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        body = self._body(messages, tools, stream=False)
        client = self._client
        import openai  # loaded with the client above: for its exception types

        try:
            if self._light is not None:
                data = await self._light(body)
            else:
                data = await client.post("/chat/completions", body=body, cast_to=object)
                self._make_light(client)
            if not isinstance(data, dict):
                # The SDK hands back text when the content-type is not JSON (a proxy's HTML page).
                raise ProviderError(
                    f"expected a JSON chat completion, got: {str(data)[:200]!r}", provider=PROVIDER
                )
            return self._parse_completion(data)
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        except MALFORMED_RESPONSE_ERRORS as exc:  # a JSON content-type over a non-JSON body, ...
            raise ProviderError(f"malformed chat completion: {exc!r}", provider=PROVIDER) from exc

    def _parse_completion(self, data: dict[str, Any]) -> LLMResponse:
        choices = data.get("choices") or []
        if not choices:
            raise ProviderError(f"response has no choices: {str(data)[:200]}", provider=PROVIDER)
        choice = choices[0]
        msg = choice.get("message") or {}
        content = msg.get("content")
        if content is None and msg.get("refusal"):
            content = msg["refusal"]  # an OpenAI safety refusal is the model's visible answer
        thinking: list[ThinkingBlock] = []
        reasoning = _reasoning_of(msg)
        if reasoning:
            thinking.append(ThinkingBlock(text=reasoning, provider=self._thinking_provider))
        calls: list[ToolCall] = []
        seen: set[str] = set()
        for raw in msg.get("tool_calls") or ():
            fn = raw.get("function") or {}
            call_id = raw.get("id") or ""
            if not call_id or call_id in seen:
                call_id = new_call_id()
            seen.add(call_id)
            call = ToolCall(call_id, fn.get("name") or "", _arguments_text(fn.get("arguments")))
            extra = raw.get("extra_content")
            if extra:
                call.provider_data = {"extra_content": extra}
            calls.append(call)
        return LLMResponse(
            content=content,
            tool_calls=calls,
            thinking=thinking,
            finish_reason=choice.get("finish_reason"),
            usage=_usage(data.get("usage")),
            model=data.get("model"),
        )

    # -- streaming --------------------------------------------------------------------------

    async def _open_stream(self, body: dict[str, Any]) -> Any:
        if self._light is not None:
            return await self._light.stream(body, _stream_cls())
        client = self._client
        stream = await client.post(
            "/chat/completions", body=body, cast_to=object, stream=True, stream_cls=_stream_cls()
        )
        self._make_light(client)
        return stream

    def _make_light(self, client: AsyncOpenAI) -> None:
        """The light poster, made once, after a first request: by then the SDK has looked up
        the platform its headers name."""
        if not self._light_made:
            self._light_made = True
            self._light = LightPost.for_client(client, self._http_client)

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        body = self._body(messages, tools, stream=True)
        self.prepare()
        import openai  # loaded by prepare: for its exception types

        try:
            sdk_stream = await self._open_stream(body)
        except openai.BadRequestError as exc:
            if "stream_options" not in body or "stream_options" not in str(exc):
                raise map_openai_error(exc) from exc
            # An older compatible server that rejects the field: stream without usage from now.
            log.warning(
                "model %s: server refused stream_options; streaming without usage", self.name
            )
            self._stream_usage = False
            body.pop("stream_options")
            try:
                sdk_stream = await self._open_stream(body)
            except openai.OpenAIError as exc2:
                raise map_openai_error(exc2) from exc2
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        asm = StreamAssembler(self._thinking_provider)
        try:
            async for chunk in sdk_stream:
                if isinstance(chunk, dict):
                    for event in asm.feed(chunk):
                        yield event
        except openai.OpenAIError as exc:
            raise map_openai_error(exc, mid_stream=True) from exc
        except MALFORMED_RESPONSE_ERRORS as exc:  # an SSE data line that is not a chunk
            raise ProviderError(f"malformed stream chunk: {exc!r}", provider=PROVIDER) from exc
        finally:
            await sdk_stream.close()
        for event in asm.finish():
            yield event


# -- conversions ------------------------------------------------------------------------------


def to_wire_tool(tool: ToolDefinition, *, strict: bool = False) -> dict[str, Any]:
    """A Chat Completions function tool.

    With `strict`, the schema goes through `openai_parameters` and the tool is marked
    `"strict": true` when the schema can be made strict (every property required, closed
    objects; https://platform.openai.com/docs/guides/function-calling#strict-mode): OpenAI then
    guarantees arguments that match it. A schema that cannot be strict is sent non-strict
    rather than weakened. Without `strict` the schema goes compacted but not closed, because
    many compatible servers (vLLM, Ollama, older gateways) reject the `strict` field or the
    strict rewrite (every property required).
    """
    if not strict:
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": openai_plain_parameters(tool.parameters),
            },
        }
    parameters, strict_ok = openai_parameters(tool.parameters)
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
    }
    if strict_ok:
        function["strict"] = True
    return {"type": "function", "function": function}


def thinking_params(cfg: ModelConfig, *, deepseek: bool) -> dict[str, Any]:
    """The request fields `models.<name>.thinking` turns into, per the APIs' documentation.

    - DeepSeek (https://api-docs.deepseek.com/guides/thinking_mode): `thinking: {"type":
      "enabled"|"disabled"}` switches thinking mode on the models that have both modes
      (deepseek-chat V3.1+, V4), plus `reasoning_effort` when `thinking.effort` is set. Sent
      only when the config says so: an unset `thinking` leaves the server's default (V4 models
      think by default), and `deepseek-reasoner` always thinks, so it gets no toggle.
    - OpenAI reasoning models (o-series, gpt-5): `reasoning_effort`
      (https://platform.openai.com/docs/api-reference/chat/create#chat-create-reasoning_effort),
      `thinking.effort` or "medium". Their reasoning itself is never returned by Chat
      Completions, so there is nothing to replay. Other OpenAI models take no thinking field.
    - Any other compatible server: nothing; its own switches differ (Qwen `enable_thinking`,
      vLLM `chat_template_kwargs`) and go unsent rather than guessed.
    """
    thinking = cfg.thinking_config()
    model = cfg.model.lower()
    if deepseek:
        if model.endswith(_DEEPSEEK_ALWAYS_THINKS):
            params: dict[str, Any] = {}
        elif thinking.enabled:
            params = {"thinking": {"type": "enabled"}}
        elif cfg.thinking_explicit():
            return {"thinking": {"type": "disabled"}}
        else:
            return {}
        if thinking.enabled and thinking.effort:
            params["reasoning_effort"] = thinking.effort
        return params
    if thinking.enabled and _OPENAI_REASONING_MODEL.search(model):
        return {"reasoning_effort": thinking.effort or "medium"}
    return {}


def to_wire_messages(
    messages: Sequence[Message], *, empty_content: bool = False
) -> list[dict[str, Any]]:
    """Our messages as Chat Completions messages.

    DeepSeek quirk (thinking mode with tools): the `reasoning_content` of every assistant
    tool-call turn since the last user message must be sent back, or the API answers 400
    ("Missing `reasoning_content` field in the assistant message"); reasoning from earlier user
    turns is dropped (https://api-docs.deepseek.com/guides/thinking_mode#tool-calls). The recorded
    client sends `""` for a tool-call turn that had none once the turn uses reasoning, so we do
    the same; a conversation without reasoning never gets the field, which keeps strict servers
    (OpenAI itself) from seeing an unknown key.
    """
    last_user = -1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            last_user = i
            break
    replay_reasoning = any(
        m.role == "assistant" and _compat_reasoning(m) is not None
        for m in messages[last_user + 1 :]
    )
    out: list[dict[str, Any]] = []
    append = out.append
    for i, m in enumerate(messages):
        role = m.role
        if role == "tool":
            append(
                {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content or ""}
            )
        elif role == "assistant":
            wire: dict[str, Any] = {"role": "assistant"}
            if m.tool_calls:
                # Chat templates of other servers (llama.cpp, vLLM, ...) read `content` on
                # every turn and fail on a tool-call turn without one; OpenAI's own API gets the
                # exact recorded form.
                if m.content or empty_content:
                    wire["content"] = m.content or ""
                wire["tool_calls"] = [_wire_call(c) for c in m.tool_calls]
                if replay_reasoning and i > last_user:
                    wire["reasoning_content"] = _compat_reasoning(m) or ""
            else:
                wire["content"] = m.content or ""
            append(wire)
        else:
            # `name` is not sent: OpenAI restricts it to ^[A-Za-z0-9_-]{1,64}$ (display names in
            # group chats often are not) and several compatible servers reject it.
            if m.images and role == "user":
                parts: list[dict[str, Any]] = [{"type": "text", "text": m.content or ""}]
                parts += [
                    {"type": "image_url", "image_url": {"url": img.data_uri()}} for img in m.images
                ]
                append({"role": role, "content": parts})
            else:
                append({"role": role, "content": m.content or ""})
    return out


def _wire_call(call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments or "{}"},
    }
    if call.provider_data and "extra_content" in call.provider_data:
        # Gemini's OpenAI-compatible endpoint returns thought signatures in the tool call's
        # `extra_content` and expects them back verbatim on the next request.
        wire["extra_content"] = call.provider_data["extra_content"]
    return wire


def _arguments_text(value: Any) -> str:
    """A call's arguments as JSON text. Some compatible servers (TGI, some gateways) send them
    as a JSON object instead of the string Chat Completions specifies."""
    if isinstance(value, str):
        return value or "{}"
    if value is None:
        return "{}"
    return json.dumps(value, ensure_ascii=False)


def _compat_reasoning(m: Message) -> str | None:
    """The reasoning text this adapter produced for `m`, or None if it carries none."""
    texts = [b.text for b in m.thinking if b.provider in _COMPAT_THINKING and not b.redacted]
    return "".join(texts) if texts else None


def _reasoning_of(obj: dict[str, Any]) -> str | None:
    # DeepSeek, Qwen and older vLLM use `reasoning_content`; newer vLLM and OpenRouter `reasoning`.
    value = obj.get("reasoning_content")
    if value is None:
        value = obj.get("reasoning")
    return value if isinstance(value, str) else None


def _usage(raw: Any) -> Usage | None:
    """Chat Completions usage, with the cached part of the prompt (OpenAI
    `prompt_tokens_details.cached_tokens`, DeepSeek `prompt_cache_hit_tokens`) and the
    reasoning part of the completion (`completion_tokens_details.reasoning_tokens`)."""
    if not isinstance(raw, dict):
        return None
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0
    return Usage(
        raw.get("prompt_tokens") or 0,
        raw.get("completion_tokens") or 0,
        cached_tokens=cached,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


class _PendingCall:
    __slots__ = ("id", "name", "parts", "started", "extra")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.started = False
        self.extra: Any = None


class StreamAssembler:
    """Turns Chat Completions chunks into StreamEvents and the final LLMResponse.

    Calls are assembled by `delta.tool_calls[].index` (parallel calls interleave by index). A
    call's `tool_call_end` is emitted only once `finish_reason` arrives, so a consumer never sees
    a call as complete unless the server said the answer was complete; a stream that ends without
    a `finish_reason` raises StreamInterrupted from `finish()`.
    """

    def __init__(self, thinking_provider: str = PROVIDER) -> None:
        self.thinking_provider = thinking_provider
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self._ended = False

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self.model is None:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage = _usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = _reasoning_of(delta)
            if reasoning:
                self.reasoning.append(reasoning)
                events.append(StreamEvent(type="thinking", text=reasoning))
            content = delta.get("content")
            if content:
                self.text.append(content)
                events.append(StreamEvent(type="text", text=content))
            for raw in delta.get("tool_calls") or ():
                self._feed_call(raw, events)
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = finish
                self._end_calls(events)
        return events

    def _index_of(self, raw: dict[str, Any]) -> int:
        index = raw.get("index")
        if isinstance(index, int):
            return index
        # Some compatible servers omit `index`: a delta naming a different id or a new function
        # starts a new call, anything else continues the last one.
        if not self.calls:
            return 0
        last = max(self.calls)
        cur = self.calls[last]
        new_id = raw.get("id")
        new_name = (raw.get("function") or {}).get("name")
        if (new_id and cur.id and new_id != cur.id) or (
            new_name and cur.name and not new_id and cur.parts
        ):
            return last + 1
        return last

    def _feed_call(self, raw: dict[str, Any], events: list[StreamEvent]) -> None:
        index = self._index_of(raw)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _PendingCall()
        fn = raw.get("function") or {}
        if raw.get("id") and not call.started:
            call.id = raw["id"]
        if fn.get("name") and not call.name:
            call.name = fn["name"]
        if raw.get("extra_content"):
            call.extra = raw["extra_content"]
        fragment = fn.get("arguments")
        if fragment is not None and not isinstance(fragment, str):
            fragment = _arguments_text(fragment)  # the whole call as an object, in one delta
        if fragment:
            call.parts.append(fragment)
        if not call.started and call.name:
            call.started = True
            if not call.id or any(c.id == call.id for i, c in self.calls.items() if i != index):
                call.id = new_call_id()
            events.append(
                StreamEvent(
                    type="tool_call_start", index=index, tool_call=ToolCall(call.id, call.name, "")
                )
            )
            if call.parts:
                events.append(
                    StreamEvent(type="tool_call_delta", index=index, text="".join(call.parts))
                )
        elif call.started and fragment:
            events.append(StreamEvent(type="tool_call_delta", index=index, text=fragment))

    def _to_call(self, call: _PendingCall) -> ToolCall:
        out = ToolCall(call.id, call.name, "".join(call.parts) or "{}")
        if call.extra:
            out.provider_data = {"extra_content": call.extra}
        return out

    def _end_calls(self, events: list[StreamEvent]) -> None:
        if self._ended:
            return
        self._ended = True
        for index in sorted(self.calls):
            call = self.calls[index]
            if call.started:
                events.append(
                    StreamEvent(type="tool_call_end", index=index, tool_call=self._to_call(call))
                )

    def finish(self) -> list[StreamEvent]:
        """The closing events once the SDK stream is exhausted; raises if it was cut short."""
        if self.finish_reason is None:
            pending = [c.name or "?" for c in self.calls.values()]
            where = f" in the middle of tool call(s) {', '.join(pending)}" if pending else ""
            raise StreamInterrupted(f"stream ended before finish_reason{where}", provider=PROVIDER)
        unnamed = [i for i, c in self.calls.items() if not c.started]
        if unnamed:
            raise StreamInterrupted(
                f"stream finished with tool call(s) at index {unnamed} that never got a name",
                provider=PROVIDER,
            )
        thinking = (
            [ThinkingBlock(text="".join(self.reasoning), provider=self.thinking_provider)]
            if self.reasoning
            else []
        )
        response = LLMResponse(
            content="".join(self.text) if self.text else None,
            tool_calls=[self._to_call(self.calls[i]) for i in sorted(self.calls)],
            thinking=thinking,
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
        )
        return [StreamEvent(type="done", response=response)]
