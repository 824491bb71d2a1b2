"""The `web_search:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field, SecretStr

from function_calls import Section


class WebSearchSettings(Section):
    enabled: bool = True
    # Without a key the web_search function is not offered to the model.
    api_key: SecretStr | None = None
    base_url: str = "https://api.perplexity.ai"
    model: str = "sonar"
    # Who may search: empty lists mean everyone; admins always may.
    allowed_groups: list[str] = Field(default_factory=list)
    allowed_users: list[str] = Field(default_factory=list)
    timeout: float = Field(default=60.0, gt=0)
