"""What `chatfn replay` (issue 40.5) reads of a chat's record: the turns a model answered (an
incoming message with at least one `model_usage` row: a slash command or a message kept as
context asked no model, so there is nothing to rehearse), and for each what the bot did then:
its tool calls (the audit, with each call's result as the model was told it), its model
requests (tokens, cost) and its replies (its outbox rows while they are kept, else the bot's
history rows after the message). Read only: a replay writes nothing to the bot's database.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from chatfn.storage.console.sessions import iso, utc
from chatfn.storage.models import messages_table, outbox_table, tool_calls_table, usage_table

M, T, U, OB = messages_table, tool_calls_table, usage_table, outbox_table
_GLOB = re.compile(r"[*?\[]")


@dataclass(slots=True)
class RecordedCall:
    function: str
    arguments: Any  # the JSON the model wrote, parsed (the raw text when it was not JSON)
    outcome: str  # ok | invalid | refused | unknown | timeout | error
    result: str  # what the model was told (`tool_calls.detail`)
    source: str  # llm | command | scheduler


@dataclass(slots=True)
class RecordedTurn:
    """One incoming message a model answered, and what the bot did with it."""

    id: int  # its `messages.id`
    platform: str
    chat_id: str
    message_id: str
    sender_id: str
    sender_name: str
    text: str
    is_group: bool
    is_at_bot: bool
    created_at: datetime
    calls: list[RecordedCall] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # the `models:` names that answered
    requests: int = 0  # its model requests (`model_usage` rows)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    replies: list[str] = field(default_factory=list)

    @property
    def chat(self) -> str:
        return f"{self.platform}:{self.chat_id}"

    def time(self) -> str:
        return iso(self.created_at) or ""


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def chat_matches(pattern: str, platform: str, chat_id: str) -> bool:
    """`--chats` is a shell glob over `platform:chat_id` (`telegram:-100*`, `*:g1`, `*`)."""
    return fnmatch.fnmatchcase(f"{platform}:{chat_id}", pattern)


def turns(engine: Engine, pattern: str, since: datetime, limit: int) -> list[RecordedTurn]:
    """The first `limit` turns since `since` in the chats `pattern` matches, oldest first."""
    asked = (
        select(U.c.id)
        .where(
            U.c.platform == M.c.platform,
            U.c.chat_id == M.c.chat_id,
            U.c.message_id == M.c.message_id,
        )
        .exists()
    )
    q = (
        select(M)
        .where(M.c.role == "user", M.c.message_id != "")
        .where(M.c.created_at >= utc(since).astimezone(UTC), asked)
        .order_by(M.c.id)
    )
    # A literal platform (`telegram:*`) or a literal chat is looked up, not scanned for.
    platform, _, chat_id = pattern.partition(":")
    if not _GLOB.search(platform):
        q = q.where(M.c.platform == platform)
        if chat_id and not _GLOB.search(chat_id):
            q = q.where(M.c.chat_id == chat_id)
    found: list[RecordedTurn] = []
    with engine.connect() as conn:
        for row in conn.execute(q.execution_options(yield_per=500)):
            if not chat_matches(pattern, row.platform, row.chat_id):
                continue
            found.append(_turn(conn, row))
            if len(found) >= limit:
                break
    return found


def _turn(conn: Any, row: Any) -> RecordedTurn:
    turn = RecordedTurn(
        id=row.id,
        platform=row.platform,
        chat_id=row.chat_id,
        message_id=row.message_id,
        sender_id=row.sender_id,
        sender_name=row.sender_name,
        text=row.text,
        is_group=bool(row.is_group),
        is_at_bot=bool(row.is_at_bot),
        created_at=utc(row.created_at),
    )
    where = (T.c.platform == row.platform, T.c.chat_id == row.chat_id)
    for c in conn.execute(
        select(T).where(*where, T.c.message_id == row.message_id).order_by(T.c.id)
    ):
        turn.calls.append(
            RecordedCall(c.function, _arguments(c.arguments), c.outcome, c.detail, c.source)
        )
    costs: list[float] = []
    for u in conn.execute(
        select(U)
        .where(U.c.platform == row.platform, U.c.chat_id == row.chat_id)
        .where(U.c.message_id == row.message_id)
        .order_by(U.c.id)
    ):
        if u.model_name not in turn.models:
            turn.models.append(u.model_name)
        turn.requests += 1
        turn.prompt_tokens += u.prompt_tokens
        turn.completion_tokens += u.completion_tokens
        if u.cost is not None:
            costs.append(u.cost)
    turn.cost = sum(costs) if costs else None
    turn.replies = _sent(conn, row) or _after(conn, row)
    return turn


def _sent(conn: Any, row: Any) -> list[str]:
    """The replies of `row`'s turn as its outbox rows name it (`reply_to`, a worker's key):
    exact while the outbox keeps them (`storage.outbox.retention`)."""
    mid, found = row.message_id, []
    rows = conn.execute(
        select(OB.c.payload, OB.c.key)
        .where(OB.c.platform == row.platform, OB.c.chat_id == row.chat_id)
        .where(OB.c.created_at >= utc(row.created_at) - timedelta(minutes=1))
        .order_by(OB.c.id)
        .limit(2000)
    )
    for r in rows:
        payload = json.loads(r.payload)
        if payload.get("notice"):
            continue
        if payload.get("reply_to") == mid or (r.key or "").startswith(f"{mid}#"):
            found.append(str(payload.get("text", "")))
    return found


def _after(conn: Any, row: Any) -> list[str]:
    """The replies of a turn whose outbox rows are gone: the bot's history rows after the
    message, up to the next message a model answered (messages kept as context in between
    are passed over; turns of one chat run one at a time, so their replies come in order)."""
    chat = (M.c.platform == row.platform, M.c.chat_id == row.chat_id)
    following = conn.execute(
        select(M.c.role, M.c.text, M.c.message_id)
        .where(*chat, M.c.id > row.id)
        .order_by(M.c.id)
        .limit(200)
    ).all()
    later = {r.message_id for r in following if r.role == "user" and r.message_id}
    turns = set()
    if later:
        turns = set(
            conn.execute(
                select(U.c.message_id)
                .where(U.c.platform == row.platform, U.c.chat_id == row.chat_id)
                .where(U.c.message_id.in_(later))
            ).scalars()
        )
    found = []
    for r in following:
        if r.role == "user" and r.message_id in turns:
            break
        if r.role == "assistant":
            found.append(r.text)
    return found
