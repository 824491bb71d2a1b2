"""`channels.http:`: the HTTP API, web page, webhook and /mcp endpoint's settings."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from chatfn.common.config import Section


class HttpSettings(Section):
    """Where the HTTP channel listens and who may use it."""

    # The address it listens on (`--host`); 0.0.0.0 only in a container or behind a firewall.
    host: str = "127.0.0.1"
    # Its port (`--port`); webhook channels and the admin console are served on it too.
    port: int = Field(default=8080, ge=0, le=65535)
    # The bearer token every /v1 route (and /metrics, /mcp) needs; set it whenever the port
    # is reachable beyond localhost.
    token: str | None = None
    # Every message the bot sends is also POSTed here (signed with `webhook_secret`).
    webhook_url: str | None = None
    # Signs every webhook POST (HMAC-SHA256, chatfn/channels/http/signature.py); never sent itself.
    webhook_secret: SecretStr | None = None
    # Serve the bot's functions over MCP (streamable HTTP) at /mcp, behind the same token.
    mcp: bool = False
    # A reverse proxy in front of this port (TLS ends there) is trusted to say what the browser
    # used: `X-Forwarded-Proto: https` makes the admin console's cookies Secure, and
    # `X-Forwarded-Host` is the host a login's Origin must match (chatfn/channels/http/proxy.py).
    # Off: those headers are ignored (anyone can send them to a port reachable directly).
    trust_proxy: bool = False

    @field_validator("token")
    @classmethod
    def _empty_token_is_none(cls, v: str | None) -> str | None:
        return v or None

    @field_validator("webhook_secret")
    @classmethod
    def _empty_secret_is_none(cls, v: SecretStr | None) -> SecretStr | None:
        return v if v is not None and v.get_secret_value() else None
