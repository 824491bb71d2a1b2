"""Who may call which function where. Used twice on purpose: to choose what the model is shown,
and again at execution, because the model is untrusted and may name a function it was not shown.
"""

from __future__ import annotations

from collections.abc import Iterable

from chatfn.common.i18n import translate
from chatfn.common.messages import GROUP_ADMIN_ROLES
from function_calls.caller import Caller
from function_calls.spec import FunctionSpec

__all__ = ["Caller", "refusal_reason"]


def refusal_reason(spec: FunctionSpec, ctx: Caller, *, via_command: bool = False) -> str | None:
    """None when `ctx` may call `spec`; otherwise a short reason, fit for the user and the model.

    A slash command counts as addressing the bot, so `require_at` does not block it.
    """
    msg = ctx.message
    why: str | None = None
    if not ctx.chat.function_allowed(spec.name):
        why = "disabled"
    elif spec.scope == "group" and not msg.is_group:
        why = "group_only"
    elif spec.scope == "private" and msg.is_group:
        why = "private_only"
    elif spec.admin_only and not ctx.is_admin and not (spec.chat_admin and group_admin(ctx)):
        why = "admin_only"
    elif spec.require_at and msg.is_group and not (msg.is_at_bot or via_command):
        why = "needs_at"
    if why is not None:
        return translate(ctx.chat.language, f"core.refused.{why}", name=spec.name)
    if not via_command and spec.for_model is not None and not spec.for_model(ctx):
        return f"{spec.name} is a command for people (/{spec.name}), not offered to the model"
    if spec.allow is not None:
        return spec.allow(ctx)
    return None


def group_admin(ctx: Caller) -> bool:
    """Whether the sender is an owner or admin of this group as its platform reports them
    (`IncomingMessage.sender_roles`, set by the channel from the platform's own data, never
    from message text) and `bot.trust_group_admins` is on. Private chats: never."""
    msg = ctx.message
    return bool(
        ctx.config.bot.trust_group_admins
        and msg.is_group
        and GROUP_ADMIN_ROLES.intersection(msg.sender_roles)
    )


def visible_functions(specs: Iterable[FunctionSpec], ctx: Caller) -> list[FunctionSpec]:
    return [s for s in specs if refusal_reason(s, ctx) is None]
