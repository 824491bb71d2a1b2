"""Built-in `approvals`: the answers to calls held for approval (issue 40).

A call of an `@tool_function(approval="chat_admin" | "admin")` function is held by the core
(function_calls/approvals.py), which asks the chat with an ID. Here: `/approve ID` and
`/deny ID [reason]`, which a platform's button sends as the presser's message (Telegram's
inline keyboard), and the console's page of pending requests (console.py). Who may answer, and
which answers are stale (expired, already answered, another chat's), is the core's rule; every
answer, refused ones included, is an audit row. Commands for people: not offered to the model
(the model must never approve its own call)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from function_calls import (
    Approvals,
    Caller,
    FunctionResult,
    MessageContext,
    Plugin,
    Status,
    tool_function,
)
from function_calls.builtins.approvals.console import VIEW
from function_calls.builtins.approvals.settings import ApprovalsSettings
from function_calls.builtins.approvals.texts import TEXTS

plugin = Plugin("approvals", settings=ApprovalsSettings, texts=TEXTS, console=[VIEW])


@plugin.status
def status(cfg: ApprovalsSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "approvals.enabled is false")
    return Status("on", "/approve and /deny answer held calls")


def _never(_ctx: Caller) -> bool:
    return False


class ApproveArgs(BaseModel):
    id: str = Field(description="The request's ID, as the request message shows it.")


class DenyArgs(BaseModel):
    id: str = Field(description="The request's ID, as the request message shows it.")
    reason: str = Field(default="", description="Why, for the model and the asker.")


@tool_function(
    name="approve",
    description="Approve a call held for approval: /approve ID.",
    examples=["/approve K3F9QX"],
    for_model=_never,
)
async def approve(ctx: MessageContext, args: ApproveArgs) -> FunctionResult:
    return await _answer(ctx, args.id, True, "")


@tool_function(
    name="deny",
    description="Deny a call held for approval: /deny ID [reason].",
    examples=["/deny K3F9QX not now"],
    for_model=_never,
)
async def deny(ctx: MessageContext, args: DenyArgs) -> FunctionResult:
    return await _answer(ctx, args.id, False, args.reason)


async def _answer(ctx: MessageContext, approval_id: str, yes: bool, reason: str) -> FunctionResult:
    # `/deny K3F9QX too much`: the free text after the ID is the reason.
    approval_id, _, rest = approval_id.strip().partition(" ")
    reason = reason or rest.strip()
    approvals = ctx.service(Approvals)
    if approvals is None:
        return FunctionResult(messages=[ctx.t("approvals.off")])
    answered = await approvals.answer(ctx, approval_id, yes, reason)
    return FunctionResult(messages=[answered.text], llm_content=answered.text)
