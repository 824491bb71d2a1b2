"""Provider failures in our own vocabulary, so the tool loop never sees an SDK exception type.

The user-facing text for each lives at one boundary (the router); these carry the detail for logs.
"""

from __future__ import annotations


class ProviderError(Exception):
    """A model request failed. `retryable` says whether trying again later may help."""

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None, provider: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.provider = provider


class ProviderTimeout(ProviderError):
    retryable = True


class ProviderRateLimited(ProviderError):
    retryable = True


class ProviderUnavailable(ProviderError):
    """Connection refused, 5xx, DNS: the service is not answering."""

    retryable = True


class ProviderAuthError(ProviderError):
    """401/403: a wrong or missing API key; retrying will not help."""


class ProviderBadRequest(ProviderError):
    """4xx other than auth and rate limits: the request itself was refused."""


class ToolsNotSupported(ProviderBadRequest):
    """The endpoint refused the `tools` parameter; the model may be downgraded to prompt mode."""


class StreamInterrupted(ProviderError):
    """A stream ended before its final event, possibly in the middle of a tool call."""

    retryable = True


# What a malformed answer raises while an SDK or an adapter decodes it: invalid JSON or a pydantic
# ValidationError (both ValueError), or a field of an unexpected type (a proxy's error page, a
# server that bends the schema). Adapters convert these to ProviderError at their boundary.
MALFORMED_RESPONSE_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)


class ProviderNotInstalled(Exception):
    """A configured provider's optional SDK is missing; the message holds the install command."""


def error_for_status(status: int, message: str, provider: str) -> ProviderError:
    """The error an HTTP status means, the same for every provider; adapters check their own
    quirks first (OpenAI-compatible "tools not supported", Gemini's 400 for a bad key)."""
    if status == 429:
        return ProviderRateLimited(message, status=status, provider=provider)
    if status in (401, 403):
        return ProviderAuthError(message, status=status, provider=provider)
    if status in (408, 504):
        return ProviderTimeout(message, status=status, provider=provider)
    if status >= 500:
        return ProviderUnavailable(message, status=status, provider=provider)
    return ProviderBadRequest(message, status=status, provider=provider)
