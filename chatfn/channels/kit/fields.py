"""Checks a platform's settings put on a field's type rather than in a validator written per
field: `api_base: Annotated[str | None, optional_url(DEFAULT_API_BASE)] = None`. An http(s)
root URL (`url`), one that may be left unset (`optional_url`: empty is None) and a path on the
bot's web server (`path`), each naming the example its error message shows; the checks are
kit/settings.py's `http_url` and `web_path`."""

from __future__ import annotations

from pydantic import AfterValidator

from chatfn.channels.kit.settings import http_url, web_path

__all__ = ["optional_url", "path", "url"]


def url(example: str) -> AfterValidator:
    """An http(s) root URL (no query, no trailing slash), like `example`."""
    return AfterValidator(lambda v: http_url(v, example))


def optional_url(example: str) -> AfterValidator:
    """An http(s) root URL like `example`, or None when unset or empty."""
    return AfterValidator(lambda v: http_url(v, example) if v else None)


def path(example: str) -> AfterValidator:
    """A path on the bot's web server (a webhook's), like `example`."""
    return AfterValidator(lambda v: web_path(v, example))
