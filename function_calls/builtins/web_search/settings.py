"""The `web_search:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field, SecretStr

from function_calls import Section


class WebSearchSettings(Section):
    """`web_search:`: the web_search function and `/web_search`, answered by an online model
    (Perplexity's API or another OpenAI-compatible one)."""

    # Off: the function and the command are not offered.
    enabled: bool = True
    # Without a key the web_search function is not offered to the model.
    api_key: SecretStr | None = None
    # The search API's base URL (OpenAI-compatible chat completions).
    base_url: str = "https://api.perplexity.ai"
    # The search model asked ("sonar", "sonar-pro").
    model: str = "sonar"
    # Who may search: empty lists mean everyone; admins always may.
    allowed_groups: list[str] = Field(default_factory=list)
    # Sender ids that may search anywhere (with `allowed_groups`: also outside those groups).
    allowed_users: list[str] = Field(default_factory=list)
    # Seconds one search may take.
    timeout: float = Field(default=60.0, gt=0)
