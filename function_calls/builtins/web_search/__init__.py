"""Built-in `web_search`: a question answered by a search-grounded model (Perplexity, or any
OpenAI-compatible search model), with its sources. On only when an API key is configured."""

from __future__ import annotations

from function_calls import Plugin, PluginHost, Status
from function_calls.builtins.web_search.client import WebSearchClient
from function_calls.builtins.web_search.functions import web_search
from function_calls.builtins.web_search.settings import WebSearchSettings
from function_calls.builtins.web_search.texts import TEXTS

__all__ = ["WebSearchClient", "WebSearchSettings", "web_search"]

plugin = Plugin("web_search", settings=WebSearchSettings, texts=TEXTS)


@plugin.status
def status(cfg: WebSearchSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "web_search.enabled is false")
    if cfg.api_key is None or not cfg.api_key.get_secret_value():
        return Status(
            "missing key",
            "web_search.api_key is not set, so the model is not offered web_search "
            "(e.g. api_key: ${PERPLEXITY_API_KEY})",
        )
    who = "everyone"
    if cfg.allowed_groups or cfg.allowed_users:
        who = f"{len(cfg.allowed_groups)} group(s), {len(cfg.allowed_users)} user(s) and admins"
    return Status("on", f"{cfg.model} at {cfg.base_url}, for {who}")


@plugin.on_setup
def create_client(host: PluginHost) -> None:
    host.provide(WebSearchClient(host.section(WebSearchSettings)))


@plugin.on_shutdown
async def close_client(host: PluginHost) -> None:
    client = host.service(WebSearchClient)
    if client is not None:
        await client.aclose()
