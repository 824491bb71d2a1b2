"""Built-in `summary` (groups only): what the chat talked about, from its stored history.

A failing or missing model never turns into an error message: the user gets a short extract of
the last messages instead, which is still what they were after (catching up). The model request
goes through `ctx.ask_model`, so it counts like any turn, typed as `/summary` too; over a limit
it is refused with the limit's sentence (LimitReached), as a message would be.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, ProviderError, tool_function, zone_named
from function_calls.builtins.summary.settings import SummarySettings
from function_calls.builtins.summary.transcript import (
    SpanError,
    extract,
    now_utc,
    parse_span,
    summarise,
    transcript,
    worth_summarising,
)

MODEL_TIMEOUT = 45.0


class SummaryArgs(BaseModel):
    span: str = Field(
        default="",
        max_length=60,
        description="What to cover: a number of recent messages ('100'), a time "
        "window ('30m', '2h', '1d') or 'today'. Empty: the last 50.",
    )


@tool_function(
    name="summary",
    # What span covers (messages, a window, today) is said once, on the field.
    description="Summarise this group chat's recent conversation, as much as the user asks for.",
    examples=["/summary", "/summary 2h", "/summary 100", "what did I miss today?"],
    scope="group",
    timeout=60,
)
async def summary(ctx: MessageContext, args: SummaryArgs) -> FunctionResult:
    cfg = ctx.settings(SummarySettings)
    tz = zone_named(ctx.config.bot.timezone)
    try:
        span = parse_span(args.span, cfg, now_utc(), tz)
    except SpanError as exc:
        reason = ctx.t(exc.key, **exc.fmt)
        return FunctionResult(
            llm_content=ctx.t("summary.not_done", reason=reason), metadata={"refused": True}
        )
    msg = ctx.message
    if span.count is not None:
        rows = await ctx.history(span.count)
    else:
        assert span.since is not None
        rows = await ctx.history_since(span.since, limit=cfg.max_messages)
    rows = [r for r in rows if worth_summarising(r)]
    if not rows:
        text = ctx.t("summary.nothing", span=ctx.t(span.label, **span.label_fmt))
        return FunctionResult(messages=[text], llm_content=text)
    bot_name = ctx.config.bot.name
    body, used = transcript(rows, cfg, tz, bot_name)
    label = ctx.t(span.label, **span.label_fmt)
    cut = ctx.t("summary.cut", used=used) if used < len(rows) else ""
    header = ctx.t("summary.header", span=label, count=len(rows), cut=cut)
    result = None
    if ctx.model is not None:
        try:
            async with asyncio.timeout(MODEL_TIMEOUT):
                result = await summarise(ctx, body, msg.chat_name or msg.chat_id)
        except (ProviderError, TimeoutError) as exc:
            ctx.logger.warning("summary model call failed: {}: {}", type(exc).__name__, exc)
    if not result:
        why = ctx.t("summary.no_model" if ctx.model is None else "summary.unavailable")
        text = ctx.t("summary.failed", span=label, why=why, extract=extract(rows, bot_name))
        return FunctionResult(messages=[text], llm_content=text, metadata={"fallback": True})
    text = f"{header}\n{result}"
    return FunctionResult(messages=[text], llm_content=text)
