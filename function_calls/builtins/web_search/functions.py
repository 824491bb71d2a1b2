"""Built-in `web_search`: a question answered by a search-grounded model, with its sources.

Each search is a model request on record like the chat's own (`ctx.model_request`: usage row,
metrics, `/stats`, the day's call and token limits). Registered only when `web_search.enabled`
is on and an API key is configured (see `status`), so a model never sees a function that can
only fail. Who may search (`allowed_groups` /
`allowed_users`; empty: everyone; admins always) is an `allow` rule, so the model is not offered
web_search where it is not allowed and a call it makes anyway is refused in code.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from function_calls import (
    Caller,
    FunctionResult,
    MessageContext,
    tool_function,
)
from function_calls.builtins.web_search.client import SearchError, WebSearchClient
from function_calls.builtins.web_search.settings import WebSearchSettings


class WebSearchArgs(BaseModel):
    query: str = Field(
        min_length=2,
        max_length=500,
        description="The question to look up, self-contained: include names, "
        "places and dates from the conversation.",
    )


def not_allowed(ctx: Caller) -> str | None:
    """Why this sender, in this chat, may not search; None when they may."""
    cfg = ctx.config.section(WebSearchSettings)
    msg = ctx.message
    if ctx.is_admin or not (cfg.allowed_groups or cfg.allowed_users):
        return None
    if msg.sender_id in cfg.allowed_users:
        return None
    if msg.is_group and msg.chat_id in cfg.allowed_groups:
        return None
    key = "web_search.not_enabled_group" if msg.is_group else "web_search.not_enabled_user"
    return ctx.t(key)


@tool_function(
    name="web_search",
    description="Search the web for current or specific facts (news, prices, schedules, recent "
    "events, anything you are not sure of) and answer with source links.",
    examples=["/web_search who won the 2024 Tour de France?", "what's the weather in Oslo today?"],
    timeout=90,
    allow=not_allowed,
)
async def web_search(ctx: MessageContext, args: WebSearchArgs) -> FunctionResult:
    client = ctx.service(WebSearchClient)
    if client is None:
        return FunctionResult(
            llm_content=ctx.t("web_search.not_configured"), metadata={"refused": True}
        )
    try:
        # Counted like a model request of the chat's (usage row, metrics, limits: over one,
        # LimitReached and no search), under this plugin's name.
        async with ctx.model_request("web_search", client.cfg.model) as request:
            answer = await client.search(args.query.strip())
            request.tokens(answer.prompt_tokens, answer.completion_tokens)
    except SearchError as exc:
        ctx.logger.warning("web search failed: {}", exc)
        return FunctionResult(
            llm_content=ctx.t("web_search.failed", error=exc.text(ctx.language)),
            metadata={"error": str(exc)},
        )
    text = answer.render()
    return FunctionResult(
        messages=[text],
        llm_content=text,
        metadata={"sources": [s.url for s in answer.sources], "model": answer.model},
    )
