"""Built-in `why`: what became of a message, in one line in the chat's language (issue 40).

`/why` replying to (or quoting) a message tells that message's fate; `/why` alone tells the
sender's last message in this chat. A member may ask about their own messages only; the bot's
admins (and, with `bot.trust_group_admins`, a group's owner and admins) about anyone's. The
fates come from the runtime's record (`MessageFates`, function_calls/fates.py), reached as a
service: `ctx.service(MessageFates)`. A command for people: not offered to the model."""

from __future__ import annotations

from function_calls import (
    Caller,
    FunctionResult,
    MessageContext,
    MessageFates,
    Plugin,
    Status,
    tool_function,
)
from function_calls.builtins.why.settings import WhySettings
from function_calls.builtins.why.texts import TEXTS

plugin = Plugin("why", settings=WhySettings, texts=TEXTS)


@plugin.status
def status(cfg: WhySettings) -> Status:
    if not cfg.enabled:
        return Status("off", "why.enabled is false")
    return Status("on", "/why tells what became of a message")


# The roles a platform reports for a group's owner and admins (IncomingMessage.sender_roles).
GROUP_ADMIN_ROLES = frozenset({"owner", "admin"})


def _never(_ctx: Caller) -> bool:
    return False


def _may_ask_for_others(ctx: MessageContext) -> bool:
    msg = ctx.message
    if ctx.is_admin:
        return True
    return bool(
        ctx.config.bot.trust_group_admins
        and msg.is_group
        and GROUP_ADMIN_ROLES.intersection(msg.sender_roles)
    )


@tool_function(
    name="why",
    description="Tell what became of a message (answered, declined and why, held, ...): "
    "reply to it with /why, or send /why alone for your last message in this chat.",
    examples=["/why"],
    for_model=_never,
)
async def why(ctx: MessageContext) -> FunctionResult:
    fates = ctx.service(MessageFates)
    if fates is None:
        return _say(ctx.t("why.off"))
    msg = ctx.message
    quoted = (msg.quoted_text or "").strip()
    if quoted:
        found = await fates.find(msg.platform, msg.chat_id, before=ctx.stored_id, quoted=quoted)
        if found is None:
            return _say(ctx.t("why.not_found"))
        if found.sender_id != msg.sender_id and not _may_ask_for_others(ctx):
            return _say(ctx.t("why.not_yours"))
    else:
        found = await fates.find(
            msg.platform, msg.chat_id, before=ctx.stored_id, sender_id=msg.sender_id
        )
        if found is None:
            return _say(ctx.t("why.none"))
    return _say(found.line(ctx.language))


def _say(text: str) -> FunctionResult:
    return FunctionResult(messages=[text], llm_content=text)
