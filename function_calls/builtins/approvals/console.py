"""The console's approvals page, declared with the built-in's `Plugin(console=...)`:
`GET /admin/api/approvals` (the pending requests of the chats the user may see) and
`POST /admin/api/approvals/{id}` `{"decision": "approve" | "deny", "reason"?}` (the same
stale-answer rules as a chat's answer; the console's own audit row beside the core's), and the
page module `static/approvals.js` with its words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from function_calls import Approvals, ConsoleCall, ConsoleRefused, ConsoleRoute, ConsoleView


def _approvals(call: ConsoleCall) -> Approvals:
    approvals: Approvals | None = call.host.service(Approvals)
    if approvals is None:
        raise ConsoleRefused(404, "approvals are not kept by this bot")
    return approvals


async def listing(call: ConsoleCall) -> dict[str, Any]:
    pending = await _approvals(call).pending()
    return {"approvals": [h.as_json() for h in pending if call.scope.allows(h.platform, h.chat_id)]}


async def answer(call: ConsoleCall) -> dict[str, Any]:
    approvals = _approvals(call)
    body = call.body if isinstance(call.body, dict) else {}
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise ConsoleRefused(400, "decision must be 'approve' or 'deny'", "decision")
    reason = str(body.get("reason") or "")[:500]
    held = await approvals.get(call.params["id"])
    if held is None or not call.scope.allows(held.platform, held.chat_id):
        raise ConsoleRefused(404, f"no approval request {call.params['id']}")
    answered = await approvals.decide(
        held.id, decision == "approve", f"console:{call.user}", reason
    )
    await call.audit(
        f"approval.{decision}",
        held.platform,
        held.chat_id,
        {"id": held.id, "function": held.function, "ok": answered.ok, "reason": reason},
    )
    if not answered.ok:
        raise ConsoleRefused(409, answered.text)
    return {"ok": True, "id": held.id, "state": "approved" if decision == "approve" else "denied"}


VIEW = ConsoleView(
    "approvals",
    routes=[
        ConsoleRoute("GET", "approvals", listing),
        ConsoleRoute("POST", "approvals/{id}", answer),
    ],
    page=Path(__file__).resolve().parent / "static" / "approvals.js",
    texts={
        "en": {
            "nav.approvals": "Approvals",
            "approvals.approve": "Approve",
            "approvals.deny": "Deny",
            "approvals.call": "Call",
            "approvals.chat": "Chat",
            "approvals.asked_by": "Asked by",
            "approvals.level": "Who may answer",
            "approvals.expires": "Expires",
            "approvals.deny_reason": "Why deny it? (the model is told)",
        },
        "zh": {
            "nav.approvals": "审批",
            "approvals.approve": "批准",
            "approvals.deny": "拒绝",
            "approvals.call": "调用",
            "approvals.chat": "会话",
            "approvals.asked_by": "发起者",
            "approvals.level": "可审批者",
            "approvals.expires": "过期时间",
            "approvals.deny_reason": "拒绝的理由？（会告知模型）",
        },
    },
)
