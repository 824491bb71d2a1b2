"""The functions of `chat_admin`. Each is a per-chat admin command (`chat_admin=True`: admin
only, and with `bot.trust_group_admins` also the group's own owner and admins, enforced by the
router whoever asks: a slash command or the model), and each acts on the chat it is called
from, never another."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from function_calls import (
    FunctionResult,
    MessageContext,
    budget_today,
    tool_function,
    zone_named,
)

TTS_MODES = ("on", "off", "auto")


def _done(text: str) -> FunctionResult:
    return FunctionResult(messages=[text], llm_content=text)


class ModelArgs(BaseModel):
    name: str = Field(default="", description="A configured model name, or 'reset'.")


@tool_function(
    name="model",
    description="Show this chat's model and the configured ones, or switch this chat's model.",
    chat_admin=True,
    examples=["/model", "/model cheap", "/model reset"],
)
async def model_command(ctx: MessageContext, args: ModelArgs) -> FunctionResult:
    name = args.name.strip()
    chat = ctx.chat
    if not name:
        where = chat.sources.get("model", "default")
        have = ", ".join(ctx.model_names) or ctx.t("admin.none")
        model = chat.model or ctx.t("admin.none")
        return _done(ctx.t("admin.model.show", model=model, source=where, names=have))
    if name == "reset":
        await ctx.clear_chat_override("model")
        return _done(ctx.t("admin.model.reset"))
    if name not in ctx.model_names:
        have = ", ".join(ctx.model_names) or ctx.t("admin.none")
        return _done(ctx.t("admin.model.unknown", name=name, names=have))
    await ctx.set_chat_override("model", name)
    return _done(ctx.t("admin.model.set", name=name))


class TtsArgs(BaseModel):
    mode: str = Field(default="", description="on: speak every reply; auto: replies to voice; off.")


@tool_function(
    name="tts",
    description="Show or set whether this chat's replies are spoken (on, off, auto).",
    chat_admin=True,
    examples=["/tts", "/tts on", "/tts auto", "/tts off"],
)
async def tts_command(ctx: MessageContext, args: TtsArgs) -> FunctionResult:
    voice = ctx.chat.values.get("voice")
    current = getattr(voice, "tts", "off")
    note = "" if ctx.config.voice.tts.provider else ctx.t("admin.tts.no_provider")
    mode = args.mode.strip().lower()
    if mode not in TTS_MODES:
        return _done(ctx.t("admin.tts.show", mode=current, note=note))
    stt = getattr(voice, "stt", True)
    await ctx.set_chat_override("voice", {"stt": stt, "tts": mode})
    return _done(ctx.t("admin.tts.set", mode=mode, note=note))


class AmbientArgs(BaseModel):
    mode: str = Field(default="", description="on: the model sees the group's chatter; off.")


@tool_function(
    name="ambient",
    description="Show or set whether the model sees this group's chatter when addressed.",
    chat_admin=True,
    examples=["/ambient", "/ambient on", "/ambient off"],
)
async def ambient_command(ctx: MessageContext, args: AmbientArgs) -> FunctionResult:
    """Ambient context on or off for this chat (docs/groups.md, "Ambient context"): an
    override that keeps the chat's count and token bounds."""
    current = ctx.chat.values.get("ambient")
    mode = args.mode.strip().lower()
    if mode not in ("on", "off"):
        where = ctx.chat.sources.get("ambient", "default")
        return _done(ctx.t("admin.ambient.show", state=str(current), source=where))
    value = {
        "enabled": mode == "on",
        "messages": getattr(current, "messages", 20),
        "tokens": getattr(current, "tokens", 1000),
    }
    await ctx.set_chat_override("ambient", value)
    state = f"on, {value['messages']} messages, {value['tokens']} tokens" if mode == "on" else "off"
    return _done(ctx.t("admin.ambient.set", state=state))


class PersonaArgs(BaseModel):
    text: str = Field(
        default="", description="A persona name, a free-text system prompt, or 'reset'."
    )


@tool_function(
    name="persona",
    description="Show this chat's persona, or set it (a configured persona name or free text).",
    chat_admin=True,
    examples=[
        "/persona",
        "/persona helper",
        "/persona You answer like a pirate.",
        "/persona reset",
    ],
)
async def persona_command(ctx: MessageContext, args: PersonaArgs) -> FunctionResult:
    text = args.text.strip()
    chat = ctx.chat
    if not text:
        where = chat.sources.get("persona", "default")
        shown = chat.persona or _short(chat.system_prompt)
        names = ", ".join(ctx.config.personas) or ctx.t("admin.none")
        return _done(ctx.t("admin.persona.show", persona=shown, source=where, names=names))
    if text == "reset":
        await ctx.clear_chat_override("persona")
        return _done(ctx.t("admin.persona.reset"))
    await ctx.set_chat_override("persona", text)
    if text in ctx.config.personas:
        return _done(ctx.t("admin.persona.named", name=text))
    return _done(ctx.t("admin.persona.text"))


@tool_function(
    name="reset",
    description="Start a fresh conversation in this chat: the model sees nothing said before.",
    chat_admin=True,
    examples=["/reset"],
)
async def reset_command(ctx: MessageContext) -> FunctionResult:
    if ctx.stored_id is None:
        return _done(ctx.t("admin.reset.nothing"))
    # History stays stored (summaries, audit); the model is shown only what follows this,
    # and the summary of the compacted history before it goes.
    await ctx.set_chat_override("reset", str(ctx.stored_id))
    await ctx.clear_chat_summary()
    return _done(ctx.t("admin.reset.done"))


@tool_function(
    name="settings",
    description="Show every effective setting of this chat and where it comes from.",
    chat_admin=True,
    examples=["/settings"],
)
async def settings_command(ctx: MessageContext) -> FunctionResult:
    chat = ctx.chat
    values = {
        "model": chat.model or ctx.t("admin.none"),
        "persona": chat.persona or _short(chat.system_prompt),
        "history_size": chat.history_size,
        "respond_in_groups": chat.respond_in_groups,
        "reply_with_mention": chat.reply_with_mention,
        "reply_with_quote": chat.reply_with_quote,
        "language": chat.language,
        "functions": _functions(ctx, chat.functions_enabled, chat.functions_disabled),
        "on_exceed": f"downgrade_to {chat.downgrade_to}" if chat.downgrade_to else "refuse",
    }
    lines = [ctx.t("admin.settings.title", chat=ctx.message.chat_id)]
    # Every declared per-chat key, the core's and the plugins' (`Plugin(chat_keys=...)`).
    for key in chat.keys:
        if not key.shown:
            continue
        value = values[key.name] if key.owner == "core" else key.show(chat.get(key))
        shown = value if value != "" else ctx.t("admin.none")
        lines.append(f"• {key.name}: {shown} ({chat.sources.get(key.name, 'default')})")
    if chat.reset_after is not None:
        lines.append(f"• {ctx.t('admin.settings.reset')} ({chat.sources.get('reset', '')})")
    summary = await ctx.chat_summary()
    if summary is not None and (chat.reset_after is None or summary.upto_id > chat.reset_after):
        lines.append(
            "• "
            + ctx.t(
                "admin.settings.summary",
                tokens=summary.tokens,
                messages=summary.messages,
                when=f"{summary.created_at:%Y-%m-%d %H:%M}",
                model=summary.model_name,
            )
        )
    budget = await budget_today(ctx)
    spent = []
    if budget.tokens is not None:
        spent.append(ctx.t("admin.settings.tokens", tokens=budget.tokens))
    if budget.cost is not None:
        spent.append(ctx.t("admin.settings.cost", cost=_money(budget.cost)))
    if spent:
        lines.append(f"• {ctx.t('admin.settings.spent', spent=', '.join(spent))}")
    if budget.standing_in:
        lines.append(f"• {ctx.t('admin.settings.downgraded', model=budget.standing_in)}")
    return _done("\n".join(lines))


class StatsArgs(BaseModel):
    scope: str = Field(default="", description="'all': every chat (admins, private chat only).")


@tool_function(
    name="stats",
    description="This chat's messages, model calls, tokens and top users, today and 7 days.",
    chat_admin=True,
    examples=["/stats", "/stats all"],
)
async def stats_command(ctx: MessageContext, args: StatsArgs) -> FunctionResult:
    zone = zone_named(ctx.config.bot.timezone)
    today = datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=6)
    msg = ctx.message
    if args.scope.strip() == "all":
        if msg.is_group:
            return _done(ctx.t("admin.stats.private_only"))
        chats = await ctx.usage_by_chat(week)
        if not chats:
            return _done(ctx.t("admin.stats.none"))
        lines = [ctx.t("admin.stats.all_title")]
        for platform, chat_id, s in chats:
            lines.append(
                ctx.t(
                    "admin.stats.all_line",
                    platform=platform,
                    chat=chat_id,
                    messages=s.messages,
                    calls=s.model_calls,
                    tokens=s.tokens,
                )
            )
        return _done("\n".join(lines))
    lines = [ctx.t("admin.stats.title", chat=msg.chat_id)]
    # Both spans are read together on a storage thread, off the event loop.
    spans = await ctx.chat_stats(today, week)
    for label, s in zip(
        (ctx.t("admin.stats.today"), ctx.t("admin.stats.week")), spans, strict=True
    ):
        top = ", ".join(f"{user} {tokens}" for user, tokens in s.top_users or [])
        line = ctx.t(
            "admin.stats.line",
            label=label,
            messages=s.messages,
            calls=s.model_calls,
            tokens=s.tokens,
            prompt=s.prompt_tokens,
            completion=s.completion_tokens,
            top=top or ctx.t("admin.none"),
        )
        if s.cost is not None:
            line += ctx.t("admin.stats.cost", cost=_money(s.cost))
        lines.append(line)
        if s.models:
            parts = []
            for name, calls, tokens, cost in s.models:
                part = ctx.t("admin.stats.model", model=name, calls=calls, tokens=tokens)
                if cost is not None:
                    part += ctx.t("admin.stats.cost", cost=_money(cost))
                parts.append(part)
            lines.append(ctx.t("admin.stats.models", models="; ".join(parts)))
    return _done("\n".join(lines))


def _money(value: float) -> str:
    """A cost as people read it: cents for sums, more digits for the fractions one request
    costs."""
    return f"{value:.2f}" if value >= 1 else f"{value:.4f}"


def _short(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return f'"{one_line[:limit]}…"' if len(one_line) > limit else f'"{one_line}"'


def _functions(ctx: MessageContext, enabled: list[str] | None, disabled: list[str]) -> str:
    if enabled is None:
        parts = [ctx.t("admin.functions.all")]
    else:
        parts = [ctx.t("admin.functions.only", names=", ".join(enabled) or ctx.t("admin.none"))]
    if disabled:
        parts.append(ctx.t("admin.functions.except", names=", ".join(disabled)))
    return " ".join(parts)
