"""Build the ChatModel a `models.<name>` config entry describes.

The only place that knows which adapter serves which provider, which SDK extra each needs, and
how prompt-based tools are layered on top; callers get a ChatModel and never an SDK type.

Adapter constructors take `(name: str, cfg: ModelConfig)`; OpenAICompatModel also takes
`native_tools=` (the effective setting chosen here, which differs from the config's only for the
OpenAI family, where the default depends on base_url). Anthropic and Gemini derive theirs from
`cfg.capabilities()`, whose default (native) is the right one for them.
"""

from __future__ import annotations

import importlib
import os

from providers.base import ChatModel
from providers.config import ModelConfig, is_openai_host
from providers.errors import ProviderNotInstalled
from providers.types import NativeTools

# provider -> (module that proves the SDK is installed, pip extra)
_OPTIONAL_SDKS = {
    "anthropic": ("anthropic", "anthropic"),
    "gemini": ("google.genai", "gemini"),
}


def default_native_tools(cfg: ModelConfig) -> NativeTools:
    """native_tools when the config leaves it unset.

    OpenAI itself always supports tools. Behind any other OpenAI-compatible URL the model may
    not (small Ollama models, vLLM without a tool parser), so try native and downgrade to
    prompt-based tools on the first "tools not supported" error. Anthropic and Gemini always
    support tools.
    """
    if cfg.native_tools is not None:
        return cfg.native_tools
    if cfg.provider == "openai":
        base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None
        return True if is_openai_host(base_url) else "auto"
    return True


def _require_sdk(provider: str, name: str) -> None:
    module, extra = _OPTIONAL_SDKS[provider]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ProviderNotInstalled(
            f'model {name!r} uses provider "{provider}", whose SDK ({module}) is not installed. '
            f'Install it with: pip install "chatfn[{extra}]"  '
            f'(from a source checkout: pip install ".[{extra}]")'
        ) from exc


def build_model(name: str, cfg: ModelConfig) -> ChatModel:
    """The model for config entry `name`, wrapped for prompt-based tools when configured so.

    Raises ProviderNotInstalled (with the pip command) when the provider's optional SDK is
    missing, so a bad config fails at start rather than on the first message.
    """
    native = default_native_tools(cfg)
    inner: ChatModel
    if cfg.provider == "openai":
        # Imported here like the others: the openai SDK alone is ~30 MB and ~0.5 s of start-up,
        # paid only by a bot that configures an OpenAI-compatible model.
        from providers.openai_compat import OpenAICompatModel

        inner = OpenAICompatModel(name, cfg, native_tools=native)
    elif cfg.provider == "anthropic":
        _require_sdk("anthropic", name)
        from providers.anthropic import AnthropicModel

        inner = AnthropicModel(name, cfg)
    elif cfg.provider == "gemini":
        _require_sdk("gemini", name)
        from providers.gemini import GeminiModel

        inner = GeminiModel(name, cfg)
    else:  # unreachable through validated config; kept for callers building ModelConfig freely
        raise ValueError(f"model {name!r}: provider {cfg.provider!r} cannot be built from config")
    return _wrap_for_tools(inner, native)


def _wrap_for_tools(inner: ChatModel, native: NativeTools) -> ChatModel:
    """Prompt-based tools for `native_tools: false`; native with a one-way downgrade for
    "auto". A model configured `true` is never wrapped, so it can never be downgraded."""
    if native is True:
        return inner
    if native is False:
        from providers.text_tools.model import TextToolsModel

        return TextToolsModel(inner)
    from providers.text_tools.downgrade import AutoToolsModel

    return AutoToolsModel(inner)
