"""Per-model settings, as they appear under `models.<name>` in config.yaml."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from providers.types import ModelCapabilities, NativeTools, PromptFormat

ProviderName = Literal["openai", "anthropic", "gemini", "scripted"]


class ThinkingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    budget_tokens: int = Field(default=2048, ge=1024)
    # Show reasoning text in the chat. Off by default: users see answers, not deliberation.
    show: bool = False


class ModelConfig(BaseModel):
    """One entry of `models:`. Secrets are SecretStr so they never reach a log line or repr."""

    model_config = ConfigDict(extra="forbid")

    provider: ProviderName = "openai"
    model: str
    api_key: SecretStr | None = None
    base_url: str | None = None
    # True: send `tools`. False: prompt-based tool calling. "auto": native, downgraded to prompt
    # mode if the endpoint says it does not support tools. None: the provider's default.
    native_tools: NativeTools | None = None
    prompt_format: PromptFormat = "hermes"
    streaming: bool = False
    thinking: ThinkingConfig | bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)

    def thinking_config(self) -> ThinkingConfig:
        if isinstance(self.thinking, bool):
            return ThinkingConfig(enabled=self.thinking)
        return self.thinking

    def capabilities(self, default_native: NativeTools = True) -> ModelCapabilities:
        return ModelCapabilities(
            native_tools=default_native if self.native_tools is None else self.native_tools,
            prompt_format=self.prompt_format,
            streaming=self.streaming,
            thinking=self.thinking_config().enabled,
        )
