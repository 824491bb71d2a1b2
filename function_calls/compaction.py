"""Compaction instead of forgetting: when a chat's history no longer fits the model's
`context_tokens`, its oldest turns are summarised into a stored summary the model sees at the
end of the system prompt, before the turns kept.

Why this shape:
- Once per compaction, not per turn: a compaction keeps only the newest turns that fit half of
  the history's budget and summarises everything before them (with the previous summary folded
  in), so the chat then grows for many turns before the next one. The summary is stored
  (`chat_summaries`), and every request until the next compaction reads it unchanged.
- A stable prefix: the summary sits at a fixed place (after the instructions), and the history
  after it starts at a fixed row, so between two compactions each request starts with the bytes
  of the previous one, which prompt caches bill at a fraction of the price
  (bench/bench_compaction.py).
- Accounted like any model request: the summary is asked through the functions' door
  (`model_access.ask_model`), so it is checked against the chat's limits first, has a usage
  row and metrics, and fails over like the chat's own requests. If it fails (or a limit stops
  it), the turn goes on as before compaction existed (the oldest turns are left out) and a
  later turn tries again.
- Tool results too: the history stores what users and the bot said; the function calls made in
  the compacted turns, with what they returned (the audit log), go into the summary request in
  their place in time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from chatfn.storage.chat_state import Summary
from function_calls.conversation import (
    BYTES_PER_TOKEN,
    Window,
    build_messages,
    estimate_tokens,
    plan_window,
)
from function_calls.limits import LimitReached
from function_calls.model_access import ask_model
from providers.errors import ProviderError
from providers.types import Message

if TYPE_CHECKING:
    from chatfn.storage.db import StoredMessage
    from function_calls.context import MessageContext
    from providers.base import ChatModel

# Characters of one message, and of one function result, in the summary request.
MESSAGE_CHARS = 2000
RESULT_CHARS = 600
SUMMARISE = (
    "You maintain the memory of a chat between users and an assistant. Write a summary of the "
    "conversation below for the assistant to read before the newer messages: who said what "
    "that still matters, facts, names, numbers, decisions, open questions and promises, and "
    "what the functions called returned. Fold the earlier summary in, if there is one. Write "
    "in the conversation's language, as plain sentences or short bullet points, at most "
    "{words} words. Reply with the summary only."
)


async def conversation(
    ctx: MessageContext, *, reserve_tokens: int = 0, extra_system: str = ""
) -> list[Message]:
    """The messages of this turn's request: `build_messages`, with the chat's summary, and a
    compaction first when the history no longer fits (`bot.compaction`)."""
    if not ctx.config.bot.compaction or ctx.model is None:
        return await build_messages(ctx, reserve_tokens=reserve_tokens, extra_system=extra_system)
    summary = await current_summary(ctx)
    window = await plan_window(
        ctx, reserve_tokens=reserve_tokens, extra_system=extra_system, summary=summary
    )
    if window.budget < 0 or not window.overflows():
        return window.messages(window.fitted())
    made = await compact(ctx, window, summary)
    if made is None:  # the summary could not be made: leave the oldest turns out, as before
        return window.messages(window.fitted())
    window = await plan_window(
        ctx, reserve_tokens=reserve_tokens, extra_system=extra_system, summary=made
    )
    return window.messages(window.fitted())


async def current_summary(ctx: MessageContext) -> Summary | None:
    """The chat's summary, unless it ends before the chat's `/reset` point (a reset clears it;
    one left by a race with it is not shown)."""
    start = ctx.turn.start
    if start is not None and start.summary_read:  # read with the turn's start (one hop)
        return start.summary
    msg = ctx.message
    summary = await ctx.turn.storage.run(
        ctx.turn.storage.chat_state.summary, msg.platform, msg.chat_id
    )
    reset = ctx.chat.reset_after
    if summary is None or (reset is not None and summary.upto_id <= reset):
        return None
    return summary


def _split(window: Window) -> tuple[list[StoredMessage], list[StoredMessage]]:
    """(rows to summarise, rows to keep): the newest whole turns that fit half the budget are
    kept, so the history grows for many turns before it overflows again."""
    turns = window.turns()
    keep_budget = window.budget // 2
    kept_tokens = 0
    first_kept = len(turns)
    for i in range(len(turns) - 1, -1, -1):
        if kept_tokens + turns[i].tokens > keep_budget:
            break
        kept_tokens += turns[i].tokens
        first_kept = i
    first_kept = max(first_kept, 1)  # something is always summarised
    old = [r for t in turns[:first_kept] for r in t.rows]
    kept = [r for t in turns[first_kept:] for r in t.rows]
    return old, kept


async def compact(ctx: MessageContext, window: Window, previous: Summary | None) -> Summary | None:
    """Summarise the window's oldest turns (and `previous`) into the chat's new summary,
    stored; None when the summary model failed (logged)."""
    old, kept = _split(window)
    if not old:
        return None
    model = _summary_model(ctx)
    words = max(60, window.budget // 4 * BYTES_PER_TOKEN // 6)  # ~a quarter of the budget
    transcript = await _transcript(ctx, old, kept, previous, model)
    request = [
        Message(role="system", content=SUMMARISE.format(words=words)),
        Message(role="user", content=transcript),
    ]
    try:
        chosen = None if model is ctx.model else model.name
        response = await ask_model(ctx, request, model=chosen)
    except (ProviderError, LimitReached) as exc:
        ctx.logger.warning(
            "history compaction failed ({}: {}); the oldest turns are left out instead",
            type(exc).__name__,
            exc,
        )
        return None
    text = (response.content or "").strip()
    if not text:
        ctx.logger.warning("history compaction: {} wrote an empty summary", model.name)
        return None
    cap = words * 8  # a summary much longer than asked would eat the budget it is there to save
    if len(text) > cap:
        text = text[:cap] + " [...]"
    summary = Summary(
        text=text,
        upto_id=old[-1].id,
        messages=(previous.messages if previous else 0) + len(old),
        tokens=estimate_tokens(text),
        model_name=model.name,
        created_at=datetime.now(UTC),
    )
    msg = ctx.message
    await ctx.turn.storage.run(
        ctx.turn.storage.chat_state.set_summary, msg.platform, msg.chat_id, summary
    )
    if ctx.turn.start is not None:  # the turn's next request reads this one, not the start's
        ctx.turn.start.summary = summary
    ctx.logger.info(
        "history compacted: {} messages summarised by {} into ~{} tokens; {} kept",
        len(old),
        model.name,
        summary.tokens,
        len(kept),
    )
    return summary


def _summary_model(ctx: MessageContext) -> ChatModel:
    name = ctx.config.bot.summary_model
    chosen = ctx.turn.model_named(name) if name is not None else None
    model = chosen or ctx.model
    assert model is not None  # conversation() checked
    return model


async def _transcript(
    ctx: MessageContext,
    old: list[StoredMessage],
    kept: list[StoredMessage],
    previous: Summary | None,
    model: ChatModel,
) -> str:
    """The turns to summarise as plain text, each function call and its result in its place
    in time, cut to what the summary model's window holds (oldest lines first go)."""
    lines: list[tuple[datetime, str]] = []
    for row in old:
        if row.role == "notice":
            continue
        who = "assistant" if row.role == "assistant" else (row.sender_name or row.sender_id)
        lines.append((row.created_at, f"{who}: {_cap(row.text, MESSAGE_CHARS)}"))
    until = kept[0].created_at if kept else datetime.now(UTC)
    msg = ctx.message
    calls = await ctx.turn.storage.run(
        ctx.turn.storage.tool_calls_between, msg.platform, msg.chat_id, old[0].created_at, until
    )
    for call in calls:
        result = _cap(call.detail or call.outcome, RESULT_CHARS)
        line = f"[function {call.function}({_cap(call.arguments, 300)}) -> {result}]"
        created = call.created_at if call.created_at.tzinfo else call.created_at.replace(tzinfo=UTC)
        lines.append((created, line))
    lines.sort(key=lambda item: item[0])
    head = f"Earlier summary:\n{previous.text}\n\n" if previous is not None else ""
    room = int(model.capabilities.context_tokens * 0.6) * BYTES_PER_TOKEN - len(head.encode())
    body: list[str] = []
    for _, line in reversed(lines):
        room -= len(line.encode()) + 1
        if room < 0:
            break
        body.append(line)
    return head + "Conversation:\n" + "\n".join(reversed(body))


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"
