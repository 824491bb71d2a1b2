"""Per-model settings, as they appear under `models.<name>` in config.yaml."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from providers.types import ModelCapabilities, NativeTools, PromptFormat

# What `provider:` accepts in config. (The scripted test model is built in code with its script.)
ProviderName = Literal["openai", "anthropic", "gemini"]


ReasoningEffort = Literal["minimal", "low", "medium", "high", "xhigh", "max"]
ToolChoice = Literal["auto", "required", "none"]


def is_openai_host(base_url: str | None) -> bool:
    """True for OpenAI's own API (no base_url means the SDK default, api.openai.com). Here, not
    in the OpenAI adapter, so deciding defaults does not import the SDK."""
    if not base_url:
        return True
    return (urlsplit(base_url).hostname or "") == "api.openai.com"


class ThinkingConfig(BaseModel):
    """`models.<name>.thinking`. Each adapter maps it to what its API documents: Anthropic
    `thinking.budget_tokens`, Gemini `thinkingConfig.thinkingBudget`, OpenAI reasoning models
    `reasoning_effort`, DeepSeek `thinking: {"type": ...}` (+ `reasoning_effort` when set)."""

    model_config = ConfigDict(extra="forbid")

    # Let the model think before it answers (reasoning), where its API can.
    enabled: bool = False
    # Anthropic and Gemini: tokens the model may spend thinking.
    budget_tokens: int = Field(default=2048, ge=1024)
    # OpenAI reasoning models (o-series, gpt-5) and DeepSeek: `reasoning_effort`. None: OpenAI
    # gets "medium" (its own default), DeepSeek gets nothing (the server's default).
    effort: ReasoningEffort | None = None
    # Stream reasoning to channels that can show it (HTTP `thinking` events). Off by default:
    # users see answers, not deliberation. Thinking is stored and logged at debug level anyway.
    show: bool = False


class ModelPrice(BaseModel):
    """`models.<name>.price`: what the provider bills, in currency units per million tokens.
    Every usage row of the model then carries its cost, and `cost_per_day` limits count it."""

    model_config = ConfigDict(extra="forbid")

    # Uncached prompt tokens, per million.
    input: float = Field(ge=0)
    # Completion tokens (reasoning included), per million.
    output: float = Field(ge=0)
    # Cached prompt tokens (OpenAI `cached_tokens`, Anthropic cache reads, DeepSeek cache
    # hits); None: billed as `input`.
    cached_input: float | None = Field(default=None, ge=0)

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        """The cost of one request: `input_tokens` is the whole prompt, cached part included."""
        cached = min(max(cached_tokens, 0), input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (input_tokens - cached) * self.input
            + cached * cached_rate
            + output_tokens * self.output
        ) / 1_000_000


class ModelConfig(BaseModel):
    """One entry of `models:`. Secrets are SecretStr so they never reach a log line or repr."""

    model_config = ConfigDict(extra="forbid")

    # The API it speaks: "openai" (OpenAI and every OpenAI-compatible server: DeepSeek,
    # Qwen, Ollama, vLLM, llama.cpp...), "anthropic" or "gemini" (their extras).
    provider: ProviderName = "openai"
    # The model id the API knows ("gpt-5-mini", "deepseek-chat", "claude-sonnet-4-5").
    model: str
    # The API key; `${VAR}` keeps it out of the file. None: the provider's environment variable
    # (OPENAI_API_KEY, ...) or, for a local server, none.
    api_key: SecretStr | None = None
    # The API's base URL for an OpenAI-compatible server ("http://127.0.0.1:11434/v1");
    # None: the provider's own.
    base_url: str | None = None
    # True: send `tools`. False: prompt-based tool calling. "auto": native, downgraded to prompt
    # mode if the endpoint says it does not support tools. None: the provider's default.
    native_tools: NativeTools | None = None
    # How tools are written into the prompt when they are not sent natively (`native_tools`
    # false or downgraded): the format the model was trained on.
    prompt_format: PromptFormat = "hermes"
    # Ask for the answer as a stream (channels that can show it grow, e.g. the web page).
    streaming: bool = False
    # The model reads images: users' pictures go to it in its provider's form.
    vision: bool = False
    thinking: ThinkingConfig | bool = False
    # How the model may use the tools it is offered: "auto" (it decides), "required" (it must
    # call one), "none" (it must not). None (the default): the field is not sent and the server
    # decides. Sent as each API spells it: OpenAI-compatible `tool_choice`, Anthropic
    # `tool_choice.type` auto/any/none, Gemini `function_calling_config.mode` AUTO/ANY/NONE.
    # llama-cpp-python's function-calling chat formats ignore `tools` unless it is "auto".
    tool_choice: ToolChoice | None = None
    # OpenAI strict function calling (`"strict": true` on tools whose schema allows it). None:
    # on for api.openai.com only, since many compatible servers reject the field.
    strict_tools: bool | None = None
    # Sampling temperature (0-2); None: the server's default.
    temperature: float | None = Field(default=None, ge=0, le=2)
    # The most tokens one answer may have; None: the server's default.
    max_tokens: int | None = Field(default=None, ge=1)
    # Seconds one request may take before it fails (and the fallback, if any, answers).
    timeout: float = Field(default=60.0, gt=0)
    # Retries of a request that failed for a passing reason (429, 5xx, a dropped connection).
    max_retries: int = Field(default=2, ge=0, le=10)
    # The HTTP stack under the openai and anthropic SDKs: "aiohttp", the SDK's own aiohttp
    # transport (less CPU per request; providers/sdk_http.py; an OpenAI-compatible model also
    # makes the SDK's per-request set-up once, providers/openai_light.py), or "httpx", the
    # SDK's default and its whole request path. An SDK without the aiohttp transport uses httpx
    # either way; Gemini's is not concerned.
    http_transport: Literal["aiohttp", "httpx"] = "aiohttp"
    # The most tokens a request may hold (tool list, prompt, history, and room for the answer):
    # the history is cut to the newest turns that fit. Estimated locally (no network call).
    # The default suits any current model; raise it for long group chats on large windows.
    context_tokens: int = Field(default=16000, ge=1000)
    # Models (keys of `models:`) that take the same turn, in order, when a request to this one
    # fails for a reason another model may not share (outage, 5xx, timeout, 429 after the
    # retries, a refused key or model); each one's own `fallback` follows it.
    fallback: list[str] = Field(default_factory=list)
    # Seconds a model that failed is skipped (its fallback answers at once), then tried again.
    cooldown: float = Field(default=60.0, ge=0)
    price: ModelPrice | None = None

    @model_validator(mode="after")
    def _tool_choice_fits(self) -> ModelConfig:
        if (
            self.provider == "anthropic"
            and self.tool_choice == "required"
            and self.thinking_config().enabled
        ):
            raise ValueError(
                "tool_choice: Anthropic refuses 'required' (tool_choice any) with thinking "
                "enabled; use 'auto' or turn thinking off"
            )
        return self

    def thinking_explicit(self) -> bool:
        """Whether `thinking` was written in the config (DeepSeek V3.2+/V4 think by default, so
        an explicit `thinking: false` must be sent as "disabled" while an unset one is not)."""
        return "thinking" in self.model_fields_set

    def thinking_config(self) -> ThinkingConfig:
        if isinstance(self.thinking, bool):
            return ThinkingConfig(enabled=self.thinking)
        return self.thinking

    def capabilities(self, default_native: NativeTools = True) -> ModelCapabilities:
        return ModelCapabilities(
            native_tools=default_native if self.native_tools is None else self.native_tools,
            prompt_format=self.prompt_format,
            streaming=self.streaming,
            vision=self.vision,
            thinking=self.thinking_config().enabled,
            show_thinking=self.thinking_config().show,
            context_tokens=self.context_tokens,
        )
