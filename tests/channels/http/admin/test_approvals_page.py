"""The console's approvals (issue 40 §2): `GET /admin/api/approvals` lists the calls held in
the chats the user may see, `POST /admin/api/approvals/{id}` answers one (approve: the call runs
and the model's loop goes on; deny: the model is told why), a second answer is refused (409),
each answer is a console audit row; an MCP caller's call of an approval function waits for the
console's answer or returns refused."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from chatfn.testing import ScriptedModel, call, say
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from tests.kit import until


class Amount(BaseModel):
    amount: int


def risky_registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Move money.", approval="admin")
        async def transfer(ctx: MessageContext, args: Amount) -> FunctionResult:
            return FunctionResult(llm_content=f"moved {args.amount}")

    return registry


def _tool_result(model: ScriptedModel) -> str:
    return [m.content or "" for m in model.requests[-1].messages if m.role == "tool"][-1]


async def test_console_lists_and_answers_approvals(console: Any) -> None:
    model = ScriptedModel(
        [call("transfer", amount=5), call("transfer", amount=6), say("Moved 5."), say("No.")],
        name="main",
    )
    c = await console(model=model, registry=risky_registry(), builtins=True)
    alice, bob = await c.client("alice"), await c.client("bob")
    # The page: named in the session with its words, its module served.
    session = (await alice.get("/admin/api/session"))[1]
    [page] = [p for p in session["pages"] if p["name"] == "approvals"]
    assert page["texts"]["zh"]["nav.approvals"] == "审批"
    status, module = await alice.get(page["module"])
    assert status == 200 and "/approvals/" in module and "export async function render" in module
    asked = await c.chat("team-a", "move 5")
    assert "Approval needed" in asked["replies"][0]["text"]
    await c.chat("ops", "move 6")

    status, found = await alice.get("/admin/api/approvals")
    assert status == 200
    pending = {a["chat_id"]: a for a in found["approvals"]}
    assert set(pending) == {"team-a", "ops"}
    team, ops = pending["team-a"], pending["ops"]
    assert (team["function"], team["arguments"], team["state"]) == (
        "transfer",
        {"amount": 5},
        "pending",
    )
    assert team["call"] == "transfer(amount=5)"
    # bob sees only the chats of his scope (http:team-*).
    assert [a["chat_id"] for a in (await bob.get("/admin/api/approvals"))[1]["approvals"]] == [
        "team-a"
    ]
    assert (await bob.send("POST", f"/admin/api/approvals/{ops['id']}", {"decision": "approve"}))[
        0
    ] == 404
    bad = await bob.send("POST", f"/admin/api/approvals/{team['id']}", {"decision": "maybe"})
    assert bad[0] == 400

    status, done = await bob.send(
        "POST", f"/admin/api/approvals/{team['id']}", {"decision": "approve"}
    )
    assert (status, done["state"]) == (200, "approved")
    await c.tb.bot.approvals.settled()
    assert _tool_result(model) == "moved 5"

    status, done = await alice.send(
        "POST", f"/admin/api/approvals/{ops['id']}", {"decision": "deny", "reason": "not today"}
    )
    assert (status, done["state"]) == (200, "denied")
    await c.tb.bot.approvals.settled()
    assert "not today" in _tool_result(model)
    again = await alice.send("POST", f"/admin/api/approvals/{ops['id']}", {"decision": "approve"})
    assert again[0] == 409 and "already answered" in again[1]["error"]
    assert (await alice.get("/admin/api/approvals"))[1]["approvals"] == []

    actions = [e["action"] for e in (await alice.get("/admin/api/audit"))[1]["entries"]]
    assert actions.count("approval.approve") == 2  # bob's, and alice's refused second answer
    assert actions.count("approval.deny") == 1


async def test_an_mcp_call_waits_for_the_console(console: Any) -> None:
    c = await console(registry=risky_registry(), builtins=True)
    alice = await c.client("alice")
    exposure = c.tb.bot.exposure
    results = []
    for decision in ("approve", "deny"):
        waiting = asyncio.create_task(
            exposure.call_function(exposure.caller(), "transfer", {"amount": 8})
        )

        async def listed() -> list[dict[str, Any]]:
            return (await alice.get("/admin/api/approvals"))[1]["approvals"]

        await until(listed, 5, "the MCP call's request is not on the approvals page")
        [held] = await listed()
        assert (held["source"], held["chat_id"]) == ("mcp", "mcp")
        body = {"decision": decision, "reason": "no"}
        assert (await alice.send("POST", f"/admin/api/approvals/{held['id']}", body))[0] == 200
        results.append(await asyncio.wait_for(waiting, 10))
    approved, denied = results
    assert (approved["ok"], approved["texts"]) == (True, ["moved 8"])
    assert (denied["ok"], denied["outcome"]) == (False, "refused")
    assert "denied: no" in denied["texts"][0]
