"""What every platform's `channels.<name>:` section shares, declared once.

- `send_rate`, `send_burst`: the pace of sends per chat, `send_rate` messages a second after a
  burst of `send_burst` (0: no limit); a platform's 429 is honoured whatever these say. A
  platform sets its own defaults in its class line:
  `class XSettings(PlatformSettings, send_rate=0.5, send_burst=5)`.
- `max_retry_after`: this platform's override of `storage.outbox.max_retry_after`, the longest
  wait the platform may ask for that is waited out inside one delivery (a longer one leaves
  the message in the outbox until it has passed: chatfn/runtime/delivery_policy.py).
- A secret left empty (`token: ""`) is no secret: None, so "not set" is one case.
- An address setting is checked by its type: `api_base: Annotated[str, url_like(DEFAULT)]`
  (an http(s) root URL), `origin_like` (an https origin), `path_like` (a path on the bot's
  web server); the error names the shape expected and pydantic the key.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr, field_validator

from chatfn.common.config import Section

__all__ = [
    "PlatformSettings",
    "http_url",
    "https_origin",
    "origin_like",
    "path_like",
    "url_like",
    "web_path",
]

#: Hosts an origin may name with plain http (a test's or a proxy's local server).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def http_url(v: str, example: str) -> str:
    """`v` as an http(s) root URL without a query or a trailing slash; ValueError naming
    the shape expected (`example`)."""
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http(s) URL like {example}, got {v!r}")
    if parts.query or parts.fragment:
        raise ValueError("expected a URL without a query or fragment")
    return v.rstrip("/")


def https_origin(v: str, expected: str, after: str = "") -> str:
    """`v` as an https origin, `scheme://host[:port]` (http only for a loopback host) with no
    path, query or credentials; ValueError naming what was `expected` ("an https origin like
    https://api.example.com"), `after` added to the one about a path (where requests go)."""
    parts = urlsplit(v.strip())
    loopback = parts.scheme == "http" and (parts.hostname or "") in LOOPBACK
    if not (parts.scheme == "https" or loopback) or not parts.netloc:
        raise ValueError(f"expected {expected} (http only for 127.0.0.1/localhost), got {v!r}")
    if parts.path.strip("/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(
            f"expected an origin without a path, query or credentials, got {v!r}{after}"
        )
    return f"{parts.scheme}://{parts.netloc}"


def web_path(v: str, example: str) -> str:
    """`v` as a path on the bot's web server (a webhook's): it starts with "/" and has no
    query or fragment; ValueError naming the shape expected (`example`)."""
    if not v.startswith("/") or "?" in v or "#" in v:
        raise ValueError(f"expected a path such as {example}, got {v!r}")
    return v


_REQUIRED: Any = object()


def url_like(example: str, *, unset: Any = _REQUIRED) -> AfterValidator:
    """A setting's check that it is an http(s) root URL like `example` (`http_url`). With
    `unset` ("" or None), an empty value is not set: that value."""
    if unset is _REQUIRED:
        return AfterValidator(lambda v: http_url(v, example))
    return AfterValidator(lambda v: http_url(v, example) if v else unset)


def origin_like(example: str) -> AfterValidator:
    """A setting's check that it is an https origin like `example` (`https_origin`)."""
    return AfterValidator(lambda v: https_origin(v, f"an https origin like {example}"))


def path_like(example: str) -> AfterValidator:
    """A setting's check that it is a path on the bot's web server like `example`."""
    return AfterValidator(lambda v: web_path(v, example))


class PlatformSettings(Section):
    """The keys every platform channel has (module docstring)."""

    # Per chat: messages per second sent after a burst of `send_burst` (0: no limit).
    send_rate: float = Field(default=1.0, ge=0)
    # Per chat: messages sent at once before `send_rate` paces them.
    send_burst: int = Field(default=3, ge=1)
    # The longest rate-limit wait (a 429's retry-after) waited out in the chat's order; a
    # longer one leaves the message in the outbox until it passed. None:
    # `storage.outbox.max_retry_after`.
    max_retry_after: float | None = Field(default=None, ge=0)

    def __init_subclass__(
        cls,
        send_rate: float | None = None,
        send_burst: int | None = None,
        pace: str | None = None,
        **kw: Any,
    ) -> None:
        """A platform's own pace: `class XSettings(PlatformSettings, send_rate=0.5)` declares
        the field again with that default; `pace` says why (the first field's meaning in the
        reference, instead of the one above)."""
        own = cls.__dict__.get("__annotations__")
        if own is None:
            own = cls.__annotations__ = {}
        if send_rate is not None:
            own["send_rate"] = float
            cls.send_rate = Field(default=send_rate, ge=0, description=pace)
            pace = None
        if send_burst is not None:
            own["send_burst"] = int
            cls.send_burst = Field(default=send_burst, ge=1, description=pace)
        super().__init_subclass__(**kw)

    @field_validator("*")
    @classmethod
    def _empty_secret_is_none(cls, v: Any) -> Any:
        return None if isinstance(v, SecretStr) and not v.get_secret_value() else v

    def problem(self) -> str | None:
        """What keeps the channel from starting, naming the key (a token not set); None when
        nothing does. The kit refuses to build the channel with it as a ConfigError."""
        return None

    def unset(self, section: str, keys: tuple[str, ...], where: str) -> str | None:
        """`problem`'s sentence for settings that must be set: "channels.<section>.<key>, ...
        must be set <where>" naming those of `keys` not set (None or ""); None when all are."""
        missing = [k for k in keys if getattr(self, k) in (None, "")]
        if not missing:
            return None
        return f"{', '.join(f'channels.{section}.{k}' for k in missing)} must be set {where}"

    def secret_text(self, name: str) -> str:
        """The value of the secret setting `name` ("" when not set)."""
        value = getattr(self, name)
        return value.get_secret_value() if isinstance(value, SecretStr) else ""
