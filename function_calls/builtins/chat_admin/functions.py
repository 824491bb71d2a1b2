"""The functions of `chat_admin`. Each is admin_only (enforced by the router whoever asks: a
slash command or the model), and each acts on the chat it is called from, never another."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, tool_function, zone_named

SHOWN = (
    "model",
    "persona",
    "history_size",
    "respond_in_groups",
    "reply_with_mention",
    "reply_with_quote",
    "language",
    "functions",
)


def _done(text: str) -> FunctionResult:
    return FunctionResult(messages=[text], llm_content=text)


class ModelArgs(BaseModel):
    name: str = Field(default="", description="A configured model name, or 'reset'.")


@tool_function(
    name="model",
    description="Show this chat's model and the configured ones, or switch this chat's model.",
    admin_only=True,
    examples=["/model", "/model cheap", "/model reset"],
)
def model_command(ctx: MessageContext, args: ModelArgs) -> FunctionResult:
    name = args.name.strip()
    chat = ctx.chat
    if not name:
        where = chat.sources.get("model", "default")
        have = ", ".join(ctx.model_names) or "none"
        return _done(f"Model here: {chat.model or 'none'} ({where}). Configured: {have}.")
    if name == "reset":
        ctx.clear_chat_override("model")
        return _done("This chat's model is the config's again.")
    if name not in ctx.model_names:
        have = ", ".join(ctx.model_names) or "none"
        return _done(f"No model named {name!r}. Configured: {have}.")
    ctx.set_chat_override("model", name)
    return _done(f"This chat now uses {name}.")


class PersonaArgs(BaseModel):
    text: str = Field(
        default="", description="A persona name, a free-text system prompt, or 'reset'."
    )


@tool_function(
    name="persona",
    description="Show this chat's persona, or set it (a configured persona name or free text).",
    admin_only=True,
    examples=[
        "/persona",
        "/persona helper",
        "/persona You answer like a pirate.",
        "/persona reset",
    ],
)
def persona_command(ctx: MessageContext, args: PersonaArgs) -> FunctionResult:
    text = args.text.strip()
    chat = ctx.chat
    if not text:
        where = chat.sources.get("persona", "default")
        shown = chat.persona or _short(chat.system_prompt)
        names = ", ".join(ctx.config.personas) or "none"
        return _done(f"Persona here: {shown} ({where}). Configured personas: {names}.")
    if text == "reset":
        ctx.clear_chat_override("persona")
        return _done("This chat's persona is the config's again.")
    ctx.set_chat_override("persona", text)
    if text in ctx.config.personas:
        return _done(f"This chat now uses the persona {text}.")
    return _done("This chat now uses that system prompt.")


@tool_function(
    name="reset",
    description="Start a fresh conversation in this chat: the model sees nothing said before.",
    admin_only=True,
    examples=["/reset"],
)
def reset_command(ctx: MessageContext) -> FunctionResult:
    if ctx.stored_id is None:
        return _done("Nothing to reset.")
    # History stays stored (summaries, audit); the model is shown only what follows this.
    ctx.set_chat_override("reset", str(ctx.stored_id))
    return _done("Fresh start: I will not see anything said here before this point.")


@tool_function(
    name="settings",
    description="Show every effective setting of this chat and where it comes from.",
    admin_only=True,
    examples=["/settings"],
)
def settings_command(ctx: MessageContext) -> FunctionResult:
    chat = ctx.chat
    values = {
        "model": chat.model or "none",
        "persona": chat.persona or _short(chat.system_prompt),
        "history_size": chat.history_size,
        "respond_in_groups": chat.respond_in_groups,
        "reply_with_mention": chat.reply_with_mention,
        "reply_with_quote": chat.reply_with_quote,
        "language": chat.language,
        "functions": _functions(chat.functions_enabled, chat.functions_disabled),
    }
    lines = [f"Settings of {ctx.message.chat_id}:"]
    for key in SHOWN:
        lines.append(f"• {key}: {values[key]} ({chat.sources.get(key, 'default')})")
    if chat.reset_after is not None:
        lines.append(f"• context reset ({chat.sources.get('reset', '')})")
    return _done("\n".join(lines))


class StatsArgs(BaseModel):
    scope: str = Field(default="", description="'all': every chat (admins, private chat only).")


@tool_function(
    name="stats",
    description="This chat's messages, model calls, tokens and top users, today and 7 days.",
    admin_only=True,
    examples=["/stats", "/stats all"],
)
def stats_command(ctx: MessageContext, args: StatsArgs) -> FunctionResult:
    zone = zone_named(ctx.config.bot.timezone)
    today = datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=6)
    msg = ctx.message
    state = ctx.storage.chat_state
    if args.scope.strip() == "all":
        if msg.is_group:
            return _done("/stats all works in a private chat with the bot only.")
        chats = state.chats_with_usage(week)
        if not chats:
            return _done("No activity in the last 7 days.")
        lines = ["Last 7 days, per chat:"]
        for platform, chat_id in chats:
            s = state.stats(platform, chat_id, week)
            lines.append(
                f"• {platform} {chat_id}: {s.messages} messages, {s.model_calls} model calls, "
                f"{s.tokens} tokens"
            )
        return _done("\n".join(lines))
    lines = [f"Stats of {msg.chat_id}:"]
    for label, since in (("Today", today), ("Last 7 days", week)):
        s = state.stats(msg.platform, msg.chat_id, since)
        top = ", ".join(f"{user} {tokens}" for user, tokens in s.top_users or []) or "none"
        lines.append(
            f"{label}: {s.messages} messages, {s.model_calls} model calls, {s.tokens} tokens "
            f"({s.prompt_tokens} prompt + {s.completion_tokens} completion); top users by "
            f"tokens: {top}"
        )
    return _done("\n".join(lines))


def _short(text: str, limit: int = 60) -> str:
    one_line = " ".join(text.split())
    return f'"{one_line[:limit]}…"' if len(one_line) > limit else f'"{one_line}"'


def _functions(enabled: list[str] | None, disabled: list[str]) -> str:
    parts = ["all" if enabled is None else "only " + (", ".join(enabled) or "none")]
    if disabled:
        parts.append("except " + ", ".join(disabled))
    return " ".join(parts)
