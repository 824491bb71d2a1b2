"""Approvals for risky calls (issue 40 §2): a call of an `approval` function is held and asked
for in the chat; an approver's `/approve ID` runs it with its stored arguments and resumes the
model's loop (or answers the slash command); `/deny` and the expiry tell the model it was
refused and why; stale answers (already answered, expired, another chat's, a member's) are
refused and audited; a restart between request and answer loses nothing."""

from __future__ import annotations

import asyncio
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from chatfn.storage.models import approvals_table, message_fates_table, messages_table
from chatfn.storage.models import tool_calls_table as tc
from chatfn.testing import ScriptedModel, TestBot, call, say
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)
from tests.kit import until

PLUGIN = textwrap.dedent(
    """
    from pydantic import BaseModel
    from function_calls import FunctionResult, MessageContext, Plugin, tool_function

    plugin = Plugin("risky")


    class Amount(BaseModel):
        amount: int


    @tool_function(description="Move money.", approval="chat_admin")
    def transfer(ctx: MessageContext, args: Amount) -> FunctionResult:
        return FunctionResult(llm_content=f"moved {args.amount}")


    @tool_function(description="Wipe it.", approval="admin", approval_timeout=0.4)
    def wipe(ctx: MessageContext) -> FunctionResult:
        return FunctionResult(messages=["wiped"])
    """
)
GROUP = "g1"
CONFIG: dict[str, Any] = {"bot": {"trust_group_admins": True}}


def _plugin(tmp_path: Path) -> str:
    path = tmp_path / "risky.py"
    path.write_text(PLUGIN)
    return str(path)


def _id(replies: list[str]) -> str:
    found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", "\n".join(replies))
    assert found, replies
    return found.group(1)


async def _rows(tb: TestBot, query: Any) -> list[Any]:
    def read() -> list[Any]:
        with tb.bot.storage.engine.connect() as conn:
            return list(conn.execute(query).all())

    return await tb.bot.storage.run(read)


async def _said(tb: TestBot, chat: str) -> list[str]:
    """What the bot said in `chat` (its history rows), in order."""
    q = (
        select(messages_table.c.text)
        .where(messages_table.c.chat_id == chat, messages_table.c.role != "user")
        .order_by(messages_table.c.id)
    )
    return [r.text for r in await _rows(tb, q)]


async def _audit(tb: TestBot, function: str) -> list[tuple[str, str, str]]:
    q = select(tc.c.source, tc.c.outcome, tc.c.arguments).where(tc.c.function == function)
    return [(r.source, r.outcome, r.arguments) for r in await _rows(tb, q.order_by(tc.c.id))]


def _tool_results(model: ScriptedModel) -> list[str]:
    last = model.requests[-1].messages
    return [m.content or "" for m in last if m.role == "tool"]


async def test_approved_call_runs_with_its_arguments_and_resumes_the_loop(
    testbot: Any, tmp_path: Path
) -> None:
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5 as asked.")])
    tb = await testbot(model=model, plugins=[_plugin(tmp_path)], config=CONFIG)
    asked = await tb.send("@bot move 5", sender="alice", group=GROUP, at_bot=True)
    approval = _id(asked)
    assert "transfer(amount=5)" in asked[0] and "/approve" in asked[0]
    assert [o for _, o, _ in await _audit(tb, "transfer")] == ["held", "requested"]

    # A member may not approve; an admin in another chat is refused there.
    refused = await tb.send(f"/approve {approval}", sender="bob", group=GROUP)
    assert refused == [f"You may not answer request {approval}."]
    elsewhere = await tb.send(f"/approve {approval}", sender="root", group="g2", admin=True)
    assert elsewhere == [f"Request {approval} belongs to another chat: answer it there."]

    ok = await tb.send(f"/approve {approval}", sender="carol", group=GROUP, roles=["admin"])
    assert ok == [f"Approved {approval}: transfer runs now."]
    await tb.bot.approvals.settled()
    assert (await _said(tb, GROUP))[-1] == "Moved 5 as asked."
    assert "moved 5" in _tool_results(model)
    outcomes = [(s, o) for s, o, _ in await _audit(tb, "transfer")]
    assert outcomes == [
        ("llm", "held"),
        ("approval", "requested"),
        ("approval", "refused"),
        ("approval", "refused"),
        ("approval", "approved"),
        ("llm", "ok"),
    ]
    counted = tb.bot.metrics.approvals.values
    assert {k[0]: v for k, v in counted.items()} == {"requested": 1, "refused": 2, "approved": 1}
    # Answered once: a second answer is stale.
    again = await tb.send(f"/approve {approval}", sender="carol", group=GROUP, roles=["admin"])
    assert again == [f"Request {approval} was already answered."]
    fates = await _rows(
        tb,
        select(message_fates_table.c.fate, message_fates_table.c.detail)
        .join(messages_table, messages_table.c.id == message_fates_table.c.message)
        .where(messages_table.c.text == "@bot move 5"),
    )
    assert [tuple(f) for f in fates] == [("answered", model.name)]


async def test_denied_call_tells_the_model_why(testbot: Any, tmp_path: Path) -> None:
    model = ScriptedModel([call("transfer", amount=9), say("It was refused.")])
    tb = await testbot(model=model, plugins=[_plugin(tmp_path)], config=CONFIG)
    approval = _id(await tb.send("@bot move 9", group=GROUP, at_bot=True))
    fate_q = select(message_fates_table.c.fate, message_fates_table.c.detail)
    assert [tuple(r) for r in await _rows(tb, fate_q)] == [("held", f"approval {approval}")]
    # /why tells the asker their message waits for that approval.
    why = await tb.send("/why", group=GROUP)
    assert f"held: a call waits for approval {approval}" in why[0]
    told = await tb.send(f"/deny {approval} too much", sender="root", group=GROUP, admin=True)
    assert told == [f"Denied {approval}: transfer will not run."]
    await tb.bot.approvals.settled()
    result = _tool_results(model)[-1]
    assert "denied transfer" in result and "too much" in result
    assert (await _said(tb, GROUP))[-1] == "It was refused."
    assert "ok" not in [o for _, o, _ in await _audit(tb, "transfer")]


async def test_expiry_tells_the_model_and_a_late_answer_is_refused(
    testbot: Any, tmp_path: Path
) -> None:
    model = ScriptedModel([call("wipe"), say("Nobody approved it.")])
    tb = await testbot(model=model, plugins=[_plugin(tmp_path)], config=CONFIG)
    approval = _id(await tb.send("wipe it", sender="alice"))

    async def told() -> bool:  # the sweeper expires it 0.4 s later, on its own
        await tb.bot.approvals.settled()
        return len(model.requests) == 2

    await until(told, 5, "the sweeper did not expire the request")
    assert "expired" in _tool_results(model)[-1]
    assert (await _said(tb, "private:alice"))[-1] == "Nobody approved it."
    late = await tb.send(f"/approve {approval}", sender="alice", admin=True)
    assert late == [f"Request {approval} has expired."]
    assert [o for _, o, _ in await _audit(tb, "wipe")] == [
        "held",
        "requested",
        "expired",
        "refused",
    ]


async def test_a_members_command_is_held_and_an_admins_runs(testbot: Any, tmp_path: Path) -> None:
    tb = await testbot(model=ScriptedModel([]), plugins=[_plugin(tmp_path)], config=CONFIG)
    approval = _id(await tb.send("/transfer amount=3", sender="bob", group=GROUP))
    assert await tb.send("/transfer amount=4", sender="root", group=GROUP, admin=True) == [
        "moved 4"
    ]
    await tb.send(f"/approve {approval}", sender="root", group=GROUP, admin=True)
    await tb.bot.approvals.settled()
    assert (await _said(tb, GROUP))[-1] == "moved 3"
    # A denied command: its sender is told, and /why says so.
    denied = _id(await tb.send("/transfer amount=9", sender="bob", group=GROUP))
    await tb.send(f"/deny {denied} no", sender="root", group=GROUP, admin=True)
    await tb.bot.approvals.settled()
    assert (await _said(tb, GROUP))[-1] == f"transfer was denied ({denied}): no."
    why = await tb.send("/why", sender="bob", group=GROUP)
    assert "the call was not approved (denied /transfer)" in why[0]
    args = [a for s, o, a in await _audit(tb, "transfer") if o == "ok"]
    assert args == ['{"amount": 4}', '{"amount": 3}']


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db_config(request: Any, tmp_path: Path) -> dict[str, Any]:
    """The bot's config on SQLite (a file under tmp_path) or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'approvals.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    return {**CONFIG, "storage": {"url": url}}


async def test_a_restart_between_request_and_answer_loses_nothing(
    tmp_path: Path, db_config: dict[str, Any]
) -> None:
    plugin = _plugin(tmp_path)
    first = TestBot(
        tmp_path,
        model=ScriptedModel([call("transfer", amount=7)]),
        plugins=[plugin],
        config=db_config,
    )
    await first.start()
    approval = _id(await first.send("@bot move 7", group=GROUP, at_bot=True))
    await first.aclose()

    model = ScriptedModel([say("Moved 7 after the restart.")])
    second = TestBot(tmp_path, model=model, plugins=[plugin], config=db_config)
    await second.start()
    try:
        pending = await second.bot.approvals.pending()
        assert [(h.id, h.arguments) for h in pending] == [(approval, {"amount": 7})]
        await second.send(f"/approve {approval}", sender="root", group=GROUP, admin=True)
        await second.bot.approvals.settled()
        assert (await _said(second, GROUP))[-1] == "Moved 7 after the restart."
        resumed = model.requests[0].messages
        # The history up to the asking message, the model's stored call, its result.
        assert "@bot move 7" in (resumed[-3].content or "")
        assert [c.name for c in resumed[-2].tool_calls] == ["transfer"]
        assert resumed[-1].role == "tool" and resumed[-1].content == "moved 7"
        state = await _rows(second, select(approvals_table.c.state, approvals_table.c.answered_by))
        assert [tuple(s) for s in state] == [("approved", "root")]
        again = await second.send(f"/deny {approval}", sender="root", group=GROUP, admin=True)
        assert again == [f"Request {approval} was already answered."]
    finally:
        await second.aclose()


async def test_a_request_that_ran_out_while_down_expires_at_start(
    tmp_path: Path, db_config: dict[str, Any]
) -> None:
    plugin = _plugin(tmp_path)
    first = TestBot(
        tmp_path, model=ScriptedModel([call("wipe")]), plugins=[plugin], config=db_config
    )
    await first.start()
    approval = _id(await first.send("wipe it", sender="alice"))
    await first.aclose()

    # Started again a second later, its clock stopped there: wipe's approval_timeout, 0.4 s,
    # ran out while it was down, and only the pass at start can find it so.
    restarted_at = time.time() + 1
    model = ScriptedModel([say("Nobody approved the wipe.")])
    second = TestBot(
        tmp_path, model=model, plugins=[plugin], config=db_config, clock=lambda: restarted_at
    )
    await second.start()  # the sweeper's first pass
    try:

        async def told() -> bool:
            await second.bot.approvals.settled()
            return bool(model.requests)

        await until(told, 5, "the request that ran out while down was not expired at start")
        assert f"approval {approval} expired" in _tool_results(model)[-1]
        assert (await _said(second, "private:alice"))[-1] == "Nobody approved the wipe."
    finally:
        await second.aclose()


async def test_two_answers_racing_decide_once(testbot: Any, tmp_path: Path) -> None:
    model = ScriptedModel([call("transfer", amount=2), say("Done.")])
    tb = await testbot(model=model, plugins=[_plugin(tmp_path)], config=CONFIG)
    approval = _id(await tb.send("@bot move 2", group=GROUP, at_bot=True))
    approvals = tb.bot.approvals
    answers = await asyncio.gather(
        approvals.decide(approval, True, "console:a"),
        approvals.decide(approval, False, "console:b"),
        approvals.decide(approval, True, "console:c"),
    )
    assert sorted(a.ok for a in answers) == [False, False, True]
    await approvals.settled()
    outcomes = [o for s, o, _ in await _audit(tb, "transfer") if s == "approval"]
    assert outcomes.count("refused") == 2 and len(model.requests) == 2
