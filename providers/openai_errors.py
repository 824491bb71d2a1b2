"""The `openai` SDK's exceptions in our vocabulary (providers.errors).

Kept apart from the adapter because the "tools not supported" detection is a list of other
servers' error texts that grows as we meet new ones, and it has its own tests.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from providers.errors import (
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    StreamInterrupted,
    ToolsNotSupported,
    error_for_status,
)

if TYPE_CHECKING:
    import openai

PROVIDER = "openai"

# How OpenAI-compatible servers say "this model cannot take the `tools` parameter". A 400, 404 or
# 422 whose message (or JSON body) matches one of these becomes ToolsNotSupported, which lets
# native_tools="auto" downgrade the model to prompt-based tools. Matched case-insensitively.
TOOLS_NOT_SUPPORTED_PATTERNS: tuple[str, ...] = (
    # Ollama: "registry.ollama.ai/library/gemma:2b does not support tools"; DeepSeek R1:
    # "deepseek-reasoner does not support Function Calling"; LM Studio and others alike.
    r"does not support (?:tools|tool calling|tool use|tool calls|function calling|functions)",
    # OpenAI o1-preview: "Unsupported parameter: 'tools' is not supported with this model."
    r"\btools?\b['\"`]? (?:is|are) not supported",
    r"\btool (?:use|calling|calls|choice) (?:is|are) not supported",  # Groq, Anthropic proxies
    r"[`'\"]tools[`'\"].{0,60}\bnot supported",  # "`tools` and `functions` are not supported"
    r"unrecognized request argument supplied: tools",  # Azure OpenAI, old api-versions
    # vLLM started without --enable-auto-tool-choice / --tool-call-parser.
    r"tool choice requires --enable-auto-tool-choice",
    r"tools param requires --jinja",  # llama.cpp server started without --jinja
    r"no endpoints found that support tool use",  # OpenRouter (a 404)
)
_TOOLS_RE = re.compile("|".join(TOOLS_NOT_SUPPORTED_PATTERNS), re.IGNORECASE | re.DOTALL)
# Pydantic-validated servers (llama-cpp-python, some proxies) reject unknown fields with
# "Extra inputs are not permitted" and the field's location; only `tools` in that location counts
# (the last element of `loc`): `["body", "tools", 0, "function", "strict"]` refuses a field inside
# a tool, so the server does take tools.
_EXTRA_INPUTS = "extra inputs are not permitted"
_EXTRA_TOOLS_LOC = re.compile(r"""["']tools["']\s*\]""")

_TOOLS_STATUSES = frozenset({400, 404, 422})


def tools_not_supported(text: str) -> bool:
    """True if an error text says the endpoint or model refuses the `tools` parameter."""
    if _TOOLS_RE.search(text):
        return True
    return _EXTRA_INPUTS in text.lower() and _EXTRA_TOOLS_LOC.search(text) is not None


def _error_text(exc: openai.APIError) -> str:
    body = exc.body
    if body is None:
        return exc.message
    try:
        return f"{exc.message} {json.dumps(body, ensure_ascii=False)}"
    except (TypeError, ValueError):
        return f"{exc.message} {body}"


def map_openai_error(exc: openai.OpenAIError, *, mid_stream: bool = False) -> ProviderError:
    """The ProviderError for an SDK exception. `mid_stream`: it was raised after the response
    started, so a dropped connection means a cut-off answer, not an unreachable service."""
    import openai  # already loaded: `exc` is one of its exceptions

    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeout(f"request timed out: {exc.message}", provider=PROVIDER)
    if isinstance(exc, openai.APIConnectionError):
        if mid_stream:
            return StreamInterrupted(f"stream connection lost: {exc.message}", provider=PROVIDER)
        return ProviderUnavailable(f"cannot reach the server: {exc.message}", provider=PROVIDER)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        text = _error_text(exc)
        if status in _TOOLS_STATUSES and tools_not_supported(text):
            return ToolsNotSupported(text, status=status, provider=PROVIDER)
        return error_for_status(status, text, PROVIDER)
    if isinstance(exc, openai.APIError):
        # An `error` object inside an SSE stream (the SDK raises a bare APIError for it).
        if mid_stream:
            return StreamInterrupted(
                f"server error in stream: {_error_text(exc)}", provider=PROVIDER
            )
        return ProviderError(_error_text(exc), provider=PROVIDER)
    return ProviderError(str(exc), provider=PROVIDER)
