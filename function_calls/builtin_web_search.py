"""Built-in `web_search`: a question answered by a search-grounded model, with its sources.

Registered only when `web_search.enabled` is on and an API key is configured (see `status`), so
a model never sees a function that can only fail. Who may search (`allowed_groups` /
`allowed_users`; empty: everyone; admins always) is an `allow` rule, so the model is not offered
web_search where it is not allowed and a call it makes anyway is refused in code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from function_calls.context import MessageContext
from function_calls.registry import tool_function
from function_calls.services.search import SearchError, WebSearchClient
from function_calls.spec import FunctionResult
from runtime.settings import Settings

if TYPE_CHECKING:
    from runtime.bot import Bot

FEATURE = "web_search"
EXTRAS_KEY = "web_search"


class WebSearchArgs(BaseModel):
    query: str = Field(
        min_length=2,
        max_length=500,
        description="The question to look up, self-contained: include names, "
        "places and dates from the conversation.",
    )


def not_allowed(ctx: MessageContext) -> str | None:
    """Why this sender, in this chat, may not search; None when they may."""
    cfg = ctx.config.web_search
    msg = ctx.message
    if ctx.is_admin or not (cfg.allowed_groups or cfg.allowed_users):
        return None
    if msg.sender_id in cfg.allowed_users:
        return None
    if msg.is_group and msg.chat_id in cfg.allowed_groups:
        return None
    where = "this group" if msg.is_group else "you"
    return f"web search is not enabled for {where} (ask an admin to add it to web_search config)"


@tool_function(
    name="web_search",
    description="Search the web for current or specific facts (news, prices, schedules, recent "
    "events, anything you are not sure of) and answer with source links.",
    examples=["/web_search who won the 2024 Tour de France?", "what's the weather in Oslo today?"],
    timeout=90,
    allow=not_allowed,
)
async def web_search(ctx: MessageContext, args: WebSearchArgs) -> FunctionResult:
    client = ctx.extras.get(EXTRAS_KEY)
    if not isinstance(client, WebSearchClient):
        return FunctionResult(
            llm_content="Web search is not configured on this bot.", metadata={"refused": True}
        )
    try:
        answer = await client.search(args.query.strip())
    except SearchError as exc:
        ctx.logger.warning("web search failed: {}", exc)
        return FunctionResult(
            llm_content=f"Web search failed: {exc}. Tell the user, or answer "
            "from what you know and say it was not checked.",
            metadata={"error": str(exc)},
        )
    text = answer.render()
    return FunctionResult(
        messages=[text],
        llm_content=text,
        metadata={"sources": [s.url for s in answer.sources], "model": answer.model},
    )


# -- wiring (called by function_calls.init_handlers) ---------------------------------------------
def status(settings: Settings) -> tuple[str, str, str]:
    cfg = settings.web_search
    if not cfg.enabled:
        return FEATURE, "off", "web_search.enabled is false"
    if cfg.api_key is None or not cfg.api_key.get_secret_value():
        return (
            FEATURE,
            "missing key",
            (
                "web_search.api_key is not set, so the model is not "
                "offered web_search (e.g. api_key: ${PERPLEXITY_API_KEY})"
            ),
        )
    who = "everyone"
    if cfg.allowed_groups or cfg.allowed_users:
        who = f"{len(cfg.allowed_groups)} group(s), {len(cfg.allowed_users)} user(s) and admins"
    return FEATURE, "on", f"{cfg.model} at {cfg.base_url}, for {who}"


def setup(bot: Bot) -> None:
    client = WebSearchClient(bot.settings.web_search)
    bot.extras[EXTRAS_KEY] = client
    bot.on_shutdown(client.aclose)
