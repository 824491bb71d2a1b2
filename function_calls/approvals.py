"""Approvals for risky calls (issue 40): `@tool_function(approval="chat_admin" | "admin")`.

A call of such a function from the model, from a slash command of someone who may not approve
it, or from an MCP client is not run: the executor says "held" (function_calls/executor.py),
and its caller asks `Approvals.request`, which stores the call (its arguments as they are now:
they cannot change) with an ID and asks the chat, with buttons where the platform has them.

    /approve ID | /deny ID [reason] | a button | the console
      -> Approvals.answer / decide: refused (and audited) when unknown, already answered,
         expired, from another chat, or from someone who may not approve; else one conditional
         UPDATE (chatfn/storage/approvals.py), an audit row, and `runner(held, decision)`
    runner (the runtime: chatfn/runtime/bot.py) runs a turn of the asking chat, in its order:
      FunctionCallRouter.resume_approval: approved -> the call runs with the stored arguments;
      denied or expired -> the call is refused with the reason; the result goes where it would
      have (the model's loop resumes with it as the tool result, or the command's reply)
    an MCP caller waits in `wait` (in this process) for the answer or the expiry.

Everything is in the database: a restart between request and answer loses nothing (an answer
after it runs the turn), and the sweeper (`start`) expires what was not answered in time,
those that expired while the bot was down included."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from chatfn.common.i18n import translate
from chatfn.common.messages import IncomingMessage
from chatfn.storage import approvals as stored
from chatfn.storage.db import TurnWrite, tool_call_row
from function_calls.caller import Caller
from function_calls.permissions import group_admin
from function_calls.spec import FunctionSpec
from providers.types import Message, ToolCall

if TYPE_CHECKING:
    from chatfn.storage.db import Storage
    from function_calls.context import MessageContext

Decision = Literal["approved", "denied", "expired"]
# No 0/O, 1/I/L: an ID is read off a screen and typed.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
# The sweeper looks again at least this often (a request made by another process).
SWEEP_EVERY = 30.0


def new_id() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(6))


def may_approve(level: str, ctx: Caller) -> bool:
    """Whether `ctx`'s sender may approve a call of `level`: the bot's admins always; for
    "chat_admin" also the group's owner and admins (with `bot.trust_group_admins`)."""
    return ctx.is_admin or (level == "chat_admin" and group_admin(ctx))


def describe_call(function: str, arguments: dict[str, Any], limit: int = 300) -> str:
    """`name(a="x", b=2)`, cut at `limit` characters: what the approver is asked about."""
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items()
    )
    text = f"{function}({args})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dump_turn(messages: list[Message]) -> list[dict[str, Any]]:
    """The turn's messages after the history (the model's calls, the results so far), as JSON
    for the approvals row: what the loop needs to go on where it stopped (no thinking, no
    images: the resumed request is built from the history again, these follow it)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        row: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            row["tool_calls"] = [[c.id, c.name, c.arguments] for c in m.tool_calls]
        if m.tool_call_id:
            row["tool_call_id"] = m.tool_call_id
        if m.name:
            row["name"] = m.name
        if m.is_error:
            row["is_error"] = True
        out.append(row)
    return out


def load_turn(data: list[dict[str, Any]] | None) -> list[Message]:
    return [
        Message(
            role=d["role"],
            content=d.get("content"),
            tool_calls=[ToolCall(c[0], c[1], c[2]) for c in d.get("tool_calls") or []],
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            is_error=bool(d.get("is_error")),
        )
        for d in data or []
    ]


@dataclass(slots=True)
class Held:
    """A call held for approval, as stored."""

    id: str
    platform: str
    chat_id: str
    is_group: bool
    sender_id: str
    sender_name: str
    message_id: str
    stored_id: int | None
    text: str
    function: str
    arguments: dict[str, Any]
    source: str  # llm | command | mcp
    level: str  # chat_admin | admin
    call_id: str
    turn: list[dict[str, Any]] | None
    state: str
    created_at: datetime
    expires_at: datetime
    answered_by: str = ""
    reason: str = ""
    answered_at: datetime | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Held:
        values = dict(row)
        values["arguments"] = json.loads(values["arguments"] or "{}")
        values["turn"] = json.loads(values["turn"]) if values.get("turn") else None
        return cls(**values)

    def row(self) -> dict[str, Any]:
        values = {k: getattr(self, k) for k in self.__slots__}
        values["arguments"] = json.dumps(self.arguments, ensure_ascii=False, default=str)
        values["turn"] = None if self.turn is None else json.dumps(self.turn, ensure_ascii=False)
        return values

    def message(self) -> IncomingMessage:
        """The message whose turn asked, again (its resumed turn's context)."""
        return IncomingMessage(
            platform=self.platform,
            chat_id=self.chat_id,
            sender_id=self.sender_id,
            sender_name=self.sender_name,
            text=self.text,
            is_group=self.is_group,
            is_at_bot=True,
            message_id=self.message_id,
        )

    def as_json(self) -> dict[str, Any]:
        """The console's view of it."""
        return {
            "id": self.id,
            "platform": self.platform,
            "chat_id": self.chat_id,
            "sender_id": self.sender_id,
            "sender_name": self.sender_name,
            "function": self.function,
            "arguments": self.arguments,
            "call": describe_call(self.function, self.arguments),
            "source": self.source,
            "level": self.level,
            "state": self.state,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
        }


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


Runner = Callable[[Held, Decision], Awaitable[None]]


@dataclass(slots=True)
class Answered:
    """What an answer did: `ok` (it decided the request) and the sentence for the answerer."""

    ok: bool
    text: str
    held: Held | None = None


@dataclass
class Approvals:
    """The bot's held calls (a service: `ctx.service(Approvals)`). `runner` is the runtime's:
    it runs the asking chat's turn once a request is decided."""

    storage: Storage
    default_timeout: float
    clock: Callable[[], float]
    runner: Runner | None = None
    # The bot's metrics (chatfn_approvals_total{outcome}); None: not counted.
    metrics: Any = None
    _waiters: dict[str, asyncio.Future[Decision]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _wake: asyncio.Event | None = None
    _sweeper: asyncio.Task[None] | None = None

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def timeout_of(self, spec: FunctionSpec) -> float:
        return spec.approval_timeout or self.default_timeout

    # -- asking ------------------------------------------------------------------------------
    async def request(
        self,
        ctx: MessageContext,
        spec: FunctionSpec,
        arguments: dict[str, Any],
        *,
        source: str,
        call_id: str = "",
        turn: list[dict[str, Any]] | None = None,
    ) -> Held:
        """Store the held call and ask the chat (its ID, the call, who may answer, the time
        left; buttons where the platform has them)."""
        msg, now = ctx.message, self.now()
        timeout = self.timeout_of(spec)
        held = Held(
            id=new_id(),
            platform=msg.platform,
            chat_id=msg.chat_id,
            is_group=msg.is_group,
            sender_id=msg.sender_id,
            sender_name=msg.sender_name or msg.sender_id,
            message_id=msg.message_id or "",
            stored_id=ctx.stored_id,
            text=msg.text,
            function=spec.name,
            arguments=arguments,
            source=source,
            level=spec.approval or "admin",
            call_id=call_id,
            turn=turn,
            state="pending",
            created_at=now,
            expires_at=now + timedelta(seconds=timeout),
        )
        await self.storage.run(stored.insert, self.storage.engine, held.row())
        await self.audit(held, "requested", msg.sender_id, "")
        who = ctx.t(f"core.approval.by_{held.level}")
        text = ctx.t(
            "core.approval.request",
            id=held.id,
            call=describe_call(held.function, arguments),
            who=who,
            minutes=f"{timeout / 60:g}",
        )
        buttons = [
            (ctx.t("core.approval.approve"), f"/approve {held.id}"),
            (ctx.t("core.approval.deny"), f"/deny {held.id}"),
        ]
        await ctx.reply(text, notice=True, buttons=buttons)
        self.kick()
        return held

    # -- answering ---------------------------------------------------------------------------
    async def get(self, approval_id: str) -> Held | None:
        row = await self.storage.run(stored.get, self.storage.engine, approval_id.strip().upper())
        return None if row is None else Held.from_row(row)

    async def answer(
        self, ctx: MessageContext, approval_id: str, approve: bool, reason: str = ""
    ) -> Answered:
        """`/approve ID`, `/deny ID reason` or a button, from `ctx`'s sender in `ctx`'s chat."""
        msg = ctx.message
        held = await self.get(approval_id)
        why: str | None = None
        if held is not None and (held.platform, held.chat_id) != (msg.platform, msg.chat_id):
            why = "other_chat"
        elif held is not None and not may_approve(held.level, ctx):
            why = "not_allowed"
        return await self._decide(
            held, approval_id, approve, msg.sender_id, reason, ctx.language, why
        )

    async def decide(
        self, approval_id: str, approve: bool, by: str, reason: str = "", language: str = "en"
    ) -> Answered:
        """An answer from the console (whose user was checked there): the same stale-answer
        rules, without the chat's."""
        held = await self.get(approval_id)
        return await self._decide(held, approval_id, approve, by, reason, language, None)

    async def _decide(
        self,
        held: Held | None,
        approval_id: str,
        approve: bool,
        by: str,
        reason: str,
        language: str,
        why: str | None,
    ) -> Answered:
        now = self.now()
        if held is None:
            return Answered(False, translate(language, "core.approval.unknown", id=approval_id))
        if why is None and held.state != "pending":
            why = "expired" if held.state == "expired" else "answered"
        elif why is None and held.expires_at <= now:
            why = "expired"
        if why is None:
            state = "approved" if approve else "denied"
            args = (self.storage.engine, held.id, state, by, reason, now)
            if not await self.storage.run(stored.answer, *args):
                fresh = await self.get(held.id)
                why = "expired" if fresh is not None and fresh.state == "expired" else "answered"
        if why is not None:
            await self.audit(held, "refused", by, f"{why}: {'approve' if approve else 'deny'}")
            logger.warning("answer to approval {} by {} refused: {}", held.id, by, why)
            return Answered(
                False, translate(language, f"core.approval.stale.{why}", id=held.id), held
            )
        decision: Decision = "approved" if approve else "denied"
        held.state, held.answered_by, held.reason = decision, by, reason
        await self.audit(held, decision, by, reason)
        self._settle(held, decision)
        key = "core.approval.approved" if approve else "core.approval.denied"
        return Answered(True, translate(language, key, id=held.id, function=held.function), held)

    def _settle(self, held: Held, decision: Decision) -> None:
        """Wake the MCP caller waiting for it, or run the asking chat's turn."""
        if held.source == "mcp":
            waiter = self._waiters.pop(held.id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(decision)
            return
        if self.runner is None:
            logger.error("approval {} decided but no runner resumes its turn", held.id)
            return
        task = asyncio.get_running_loop().create_task(self._run(held, decision))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, held: Held, decision: Decision) -> None:
        assert self.runner is not None
        try:
            await self.runner(held, decision)
        except Exception as exc:  # a resumed turn's failure must not take the sweeper down
            logger.opt(exception=exc).error("the turn of approval {} failed", held.id)

    async def audit(self, held: Held, outcome: str, by: str, detail: str) -> None:
        """One tool_calls row per request and per answer (source "approval"), counted."""
        if self.metrics is not None:
            self.metrics.approvals.labels(outcome).inc()
        row = tool_call_row(
            platform=held.platform,
            chat_id=held.chat_id,
            sender_id=by,
            message_id=held.message_id,
            function=held.function,
            arguments=held.arguments,
            source="approval",
            outcome=outcome,
            detail=f"{held.id} ({held.source}, {held.level}){': ' + detail if detail else ''}",
        )
        batch = TurnWrite(held.platform, held.chat_id, tool_calls=[row])
        try:
            await self.storage.run(self.storage.write_turn, batch)
        except Exception as exc:  # the record must not stop the answer
            logger.error("audit row of approval {} not written: {}", held.id, exc)

    # -- waiting (MCP) and expiring -----------------------------------------------------------
    async def wait(self, held: Held) -> Decision:
        """Wait for the answer to `held` (an MCP caller's), or its expiry."""
        waiter: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiters[held.id] = waiter
        left = (held.expires_at - self.now()).total_seconds()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), max(left, 0) + 0.05)
        except TimeoutError:
            await self.sweep()
            return waiter.result() if waiter.done() else "expired"
        finally:
            self._waiters.pop(held.id, None)

    async def pending(self) -> list[Held]:
        rows = await self.storage.run(stored.pending, self.storage.engine)
        return [Held.from_row(r) for r in rows]

    async def sweep(self) -> int:
        """Expire what is due: audited, and the model (or the command's sender) told."""
        rows = await self.storage.run(stored.expire_due, self.storage.engine, self.now())
        for row in rows:
            held = Held.from_row(row)
            logger.info("approval {} of {} expired", held.id, held.function)
            await self.audit(held, "expired", "", "")
            self._settle(held, "expired")
        return len(rows)

    def kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        if self._sweeper is None:
            self._wake = asyncio.Event()
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())

    async def _sweep_loop(self) -> None:
        assert self._wake is not None
        while True:
            try:
                await self.sweep()
                nxt = await self.storage.run(stored.next_expiry, self.storage.engine)
            except Exception as exc:  # the database away for a while: try again later
                logger.error("approvals not swept: {}", exc)
                nxt = None
            wait = SWEEP_EVERY
            if nxt is not None:
                wait = min(SWEEP_EVERY, max(0.05, (nxt - self.now()).total_seconds()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def settled(self) -> None:
        """Wait for the turns that decided requests started (tests; shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await self.settled()
