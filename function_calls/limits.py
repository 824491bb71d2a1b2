"""Limits per user and per chat: messages per minute, model calls, tokens and cost per day.

Checked once per message that reaches a model, before its first model request, whatever path
it takes: in a bot's turn, in the same transaction that stores the message
(`Storage.begin_turn`), so the check costs no commit of its own; a slash command that asks a
model (`/summary`, `/web_search`, a plugin's command) at its first request (`admit_call`). A
slash command that asks no model is not counted, and a message is counted once however many
requests it makes. Counts live in the database (`storage.chat_state`), in fixed windows (the
current minute; the current day in `bot.timezone`), so a restart resets nothing and a window's
end is the moment it resets. The check and the count are one transaction whose count is an
atomic upsert that locks the counter row (`ChatState.take`), so concurrent messages cannot both
take the last slot, in one process or across workers sharing a PostgreSQL database: messages
and model calls are exact. Tokens are
known only after a call, so a call started under the token limit may end above it; the next
message is then refused. A request's tokens (and a turn's model calls after its first) are
counted with the turn's next write (its next tool-call row or its end:
function_calls/journal.py), not in a transaction of their own: a message of the same user in
another chat that starts before that write does not see them yet. Cost (from
`models.<name>.price`) is counted like tokens, in millionths of a currency unit.

Over a budget (tokens or cost per day) a chat whose `on_exceed` is `{downgrade_to: MODEL}` is
not refused: the turn runs on MODEL, and the chat is told once per window. What MODEL spends
while standing in is also counted on its own (counters `tokens@MODEL`, `cost@MODEL`) against
the same limits, so the cheaper model has a budget of its own: past it, the chat is refused.
Limits of another kind (messages per minute, model calls per day) always refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from chatfn.common.config import CoreSettings, LimitSettings, LimitValues, zone_named
from chatfn.common.messages import IncomingMessage
from chatfn.storage.chat_state import Check, Counter

if TYPE_CHECKING:
    from chatfn.storage.db import Storage
    from function_calls.context import MessageContext

Metric = Literal["messages_per_minute", "model_calls_per_day", "tokens_per_day", "cost_per_day"]
_WHAT = {
    "messages_per_minute": "messages per minute",
    "model_calls_per_day": "model calls per day",
    "tokens_per_day": "tokens per day",
    "cost_per_day": "cost per day",
}
# Budgets: over one of these, `on_exceed` may downgrade instead of refusing.
BUDGETS = frozenset({"tokens_per_day", "cost_per_day"})
# Cost counters count millionths of a currency unit (counters are integers).
MICROS = 1_000_000


@dataclass(frozen=True, slots=True)
class Refusal:
    """A limit was reached: `text` is for the user, `notify` False when they were already told
    in this window (then the bot stays silent, so it cannot be made to spam a group)."""

    limit: str  # "per_user.messages_per_minute"
    text: str
    notify: bool


@dataclass(frozen=True, slots=True)
class Downgrade:
    """A budget was reached and the chat goes on with `model` (`on_exceed: {downgrade_to}`);
    `text` for the chat, `notify` True once per window."""

    limit: str  # "per_chat.cost_per_day"
    model: str
    text: str
    notify: bool


def _windows(now: datetime, zone_name: str | None) -> tuple[str, datetime, str, datetime]:
    """(minute window, its end, day window, its end) for `now`. Several times per message,
    and the same for a minute: the last answer is kept (the time-zone arithmetic cost more
    than the rest of a limit check)."""
    minute = now.astimezone(UTC).replace(second=0, microsecond=0)
    key = (minute, zone_name)
    last = _last_windows[0]  # one read: another thread may replace it meanwhile
    if last is not None and last[0] == key:
        windows: tuple[str, datetime, str, datetime] = last[1]
        return windows
    found = _compute_windows(now, minute, zone_name)
    _last_windows[0] = (key, found)
    return found


# ((minute, zone name), windows): the last `_windows` answer.
_last_windows: list[Any] = [None]


def _compute_windows(
    now: datetime, minute: datetime, zone_name: str | None
) -> tuple[str, datetime, str, datetime]:
    local = now.astimezone(zone_named(zone_name))
    day_start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    day_end = (day_start + timedelta(days=1, hours=1)).replace(hour=0)
    return (
        minute.strftime("%Y-%m-%dT%H:%M"),
        minute + timedelta(minutes=1),
        day_start.strftime("%Y-%m-%d"),
        day_end,
    )


def _checks(
    scope: str,
    platform: str,
    key: str,
    values: LimitValues,
    minute: str,
    day: str,
    budget_of: str | None = None,
) -> list[tuple[Metric, Check]]:
    """The checks of one scope. `budget_of`: count the budgets of that stand-in model only."""
    out: list[tuple[Metric, Check]] = []

    def counter(metric: str, window: str) -> Counter:
        if metric in ("tokens", "cost") and budget_of:
            metric = f"{metric}@{budget_of}"[:48]
        return Counter(scope, platform, key, metric, window)

    if values.messages_per_minute is not None:
        c = Check(counter("messages", minute), values.messages_per_minute)
        out.append(("messages_per_minute", c))
    if values.model_calls_per_day is not None:
        c = Check(counter("model_calls", day), values.model_calls_per_day)
        out.append(("model_calls_per_day", c))
    if values.tokens_per_day is not None:
        out.append(("tokens_per_day", Check(counter("tokens", day), values.tokens_per_day, 0)))
    if values.cost_per_day is not None:
        limit = round(values.cost_per_day * MICROS)
        out.append(("cost_per_day", Check(counter("cost", day), limit, 0)))
    return out


def _amount(metric: str, limit: int) -> str:
    return f"{limit / MICROS:g}" if metric == "cost_per_day" else str(limit)


def clock() -> datetime:
    """Now, in UTC (a test pins it so a window cannot roll over mid-test)."""
    return datetime.now(UTC)


def _exempt(ctx: MessageContext) -> bool:
    return ctx.chat.limits.exempt_admins and ctx.is_admin


Named = list[tuple[str, Metric, Check]]


def plan(
    config: CoreSettings,
    msg: IncomingMessage,
    is_admin: bool,
    now: datetime | None = None,
    budget_of: str | None = None,
    limits: LimitSettings | None = None,
) -> Named:
    """The checks a message that reaches the model is counted against, as (scope, metric,
    check): what `Storage.begin_turn` counts in the transaction that stores the message
    (runtime), or `admit` counts itself. `limits`: the chat's own (an override), else
    `limits:`."""
    limits = limits or config.limits
    if limits.exempt_admins and is_admin:
        return []
    minute, _, day, _ = _windows(now or clock(), config.bot.timezone)
    user = _checks("user", msg.platform, msg.sender_id, limits.per_user, minute, day, budget_of)
    chat = _checks("chat", msg.platform, msg.chat_id, limits.per_chat, minute, day, budget_of)
    return [("per_user", m, c) for m, c in user] + [("per_chat", m, c) for m, c in chat]


def notice_counter(named: Named) -> Callable[[Check], Counter]:
    """The counter of "the user was told about this limit in this window" (told once), for a
    check of `named`."""

    def counter(check: Check) -> Counter:
        metric = next(m for _, m, c in named if c == check)
        c = check.counter
        return Counter(c.scope, c.platform, c.key, f"told:{metric}", c.window)

    return counter


def _take(storage: Storage, named: Named) -> tuple[Check | None, bool]:
    """Count the checks (all or nothing) and, when one fails, whether this is the first
    refusal of its window (runs in the storage thread)."""
    failed = storage.chat_state.take([c for _, _, c in named])
    if failed is None:
        return None, False
    return failed, storage.chat_state.first_time(notice_counter(named)(failed))


async def admit(ctx: MessageContext, now: datetime | None = None) -> Refusal | Downgrade | None:
    """Count this message (and its first model call) against every limit, or refuse it with
    nothing counted, or (over a budget, with `on_exceed: {downgrade_to}`) count it against the
    stand-in model's own budget and say which model goes on. The first model call is reserved
    here so that concurrent messages cannot all pass a "calls so far < limit" check before any
    of them is counted. When the runtime counted them already, with the message
    (`ctx.turn.start`), its verdict is used."""
    start, named = ctx.turn.start, ctx.turn.limit_plan
    if start is None or named is None or not start.checked:
        named = plan(ctx.config, ctx.message, ctx.is_admin, now, limits=ctx.chat.limits)
        if not named:
            ctx.turn.counted = True
            return None
        failed, told = await ctx.turn.storage.run(_take, ctx.turn.storage, named)
    else:
        if not named:
            ctx.turn.counted = True
            return None
        failed, told = start.refused, start.told
    if failed is None:
        ctx.turn.counted = True
        ctx.turn.reserved_calls = 1 if any(m == "model_calls_per_day" for _, m, _ in named) else 0
        return None
    scope, metric, check = next(n for n in named if n[2] == failed)
    target = ctx.chat.downgrade_to
    current = ctx.model.name if ctx.model is not None else None
    if metric in BUDGETS and target is not None and target != current:
        return await _downgrade(ctx, now, target, scope, metric, check)
    return _refusal(ctx, now, scope, metric, check, told)


def _refusal(
    ctx: MessageContext,
    now: datetime | None,
    scope: str,
    metric: Metric,
    check: Check,
    told: bool,
) -> Refusal:
    minute_end, day_end = _windows(now or clock(), ctx.config.bot.timezone)[1::2]
    resets = minute_end if metric == "messages_per_minute" else day_end
    when = resets.astimezone(zone_named(ctx.config.bot.timezone))
    who = "You have" if scope == "per_user" else "This chat has"
    text = (
        f"{who} reached the limit of {_amount(metric, check.limit)} {_WHAT[metric]}; "
        f"it resets at {when:%H:%M}{'' if metric == 'messages_per_minute' else ' tomorrow'}."
    )
    return Refusal(f"{scope}.{metric}", text, told)


def _take_downgrade(
    storage: Storage, named: Named, told: Counter, target: str
) -> tuple[Check | None, bool]:
    """The stand-in's checks (all or nothing); when they pass, whether the chat is told of the
    downgrade for the first time in this window; when one fails, whether of that refusal (a
    notice of its own: the budget's first notice was spent on the downgrade)."""
    failed = storage.chat_state.take([c for _, _, c in named])
    if failed is None:
        return None, storage.chat_state.first_time(told)
    c = notice_counter(named)(failed)
    own = Counter(c.scope, c.platform, c.key, f"{c.metric}@{target}"[:48], c.window)
    return failed, storage.chat_state.first_time(own)


async def _downgrade(
    ctx: MessageContext,
    now: datetime | None,
    target: str,
    scope: str,
    metric: Metric,
    check: Check,
) -> Refusal | Downgrade:
    """Over a budget: the stand-in model, within its own budget and every other limit (the
    first count was rolled back whole, so this one counts the message)."""
    now = now or clock()
    standin = plan(
        ctx.config, ctx.message, ctx.is_admin, now, budget_of=target, limits=ctx.chat.limits
    )
    _, _, day, day_end = _windows(now, ctx.config.bot.timezone)
    c = check.counter
    told_counter = Counter(c.scope, c.platform, c.key, "told:downgrade", day)
    failed, told = await ctx.turn.storage.run(
        _take_downgrade, ctx.turn.storage, standin, told_counter, target
    )
    if failed is not None:
        scope2, metric2, check2 = next(n for n in standin if n[2] == failed)
        return _refusal(ctx, now, scope2, metric2, check2, told)
    ctx.turn.counted = True
    ctx.turn.reserved_calls = 1 if any(m == "model_calls_per_day" for _, m, _ in standin) else 0
    ctx.turn.downgraded = target
    when = day_end.astimezone(zone_named(ctx.config.bot.timezone))
    who = "You have" if scope == "per_user" else "This chat has"
    text = (
        f"{who} reached the limit of {_amount(metric, check.limit)} {_WHAT[metric]}; "
        f"answering with {target} until {when:%H:%M} tomorrow."
    )
    return Downgrade(f"{scope}.{metric}", target, text, told)


def request_counts(
    ctx: MessageContext, tokens: int, cost: float | None = None, now: datetime | None = None
) -> list[Any]:
    """After a model request: the (counter, amount) additions for its tokens and cost, and for
    the call itself unless `admit` reserved it; in a downgraded turn the tokens and cost also
    count on the stand-in model's own budget. The caller writes them with the turn's next
    write (`TurnJournal.add_counts`)."""
    limits = ctx.chat.limits
    if _exempt(ctx):
        return []
    msg = ctx.message
    scopes = [
        ("user", msg.sender_id, limits.per_user),
        ("chat", msg.chat_id, limits.per_chat),
    ]
    if not any(
        v.model_calls_per_day is not None
        or v.tokens_per_day is not None
        or v.cost_per_day is not None
        for _, _, v in scopes
    ):
        return []  # no call, token or cost limit: nothing to count (nor a window to compute)
    _, _, day, _ = _windows(now or clock(), ctx.config.bot.timezone)
    counts: list[tuple[Counter, int]] = []
    if ctx.turn.reserved_calls > 0:
        ctx.turn.reserved_calls -= 1
    else:
        counts += [
            (Counter(scope, msg.platform, key, "model_calls", day), 1)
            for scope, key, values in scopes
            if values.model_calls_per_day is not None
        ]
    micros = round(cost * MICROS) if cost else 0
    for suffix in ["", *([f"@{ctx.turn.downgraded}"] if ctx.turn.downgraded else [])]:
        if tokens > 0:
            counts += [
                (Counter(scope, msg.platform, key, f"tokens{suffix}"[:48], day), tokens)
                for scope, key, values in scopes
                if values.tokens_per_day is not None
            ]
        if micros > 0:
            counts += [
                (Counter(scope, msg.platform, key, f"cost{suffix}"[:48], day), micros)
                for scope, key, values in scopes
                if values.cost_per_day is not None
            ]
    return counts


class LimitReached(Exception):
    """A function asked a model (`ctx.ask_model`, `ctx.model_request`) over a limit: nothing was
    requested. The executor turns it into a refused call whose text is the limit's short
    sentence (`refusal.text`, said once per window like a refused message)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.text)
        self.refusal = refusal


async def admit_call(ctx: MessageContext, now: datetime | None = None) -> Refusal | None:
    """Count one model request a function makes (and reserve it, as `admit` reserves a turn's
    first) against `model_calls_per_day`, `tokens_per_day` and `cost_per_day`, per user and per
    chat, or refuse it with nothing counted. The first request of a message not counted yet
    (a slash command's: `/summary`, `/web_search`) counts the message too, against
    `messages_per_minute`: a message that makes a model request reaches the model, whatever
    path it takes. Once per message: a turn's own message was counted with it (`admit`), and a
    function's later requests do not count it again."""
    if ctx.turn.counted:
        return await _admit_call(ctx, now)
    async with ctx.turn.counting:  # concurrent first requests: the message counts once
        return await _admit_call(ctx, now)


async def _admit_call(ctx: MessageContext, now: datetime | None) -> Refusal | None:
    now = now or clock()
    named = plan(
        ctx.config,
        ctx.message,
        ctx.is_admin,
        now,
        budget_of=ctx.turn.downgraded,  # in a downgraded turn, the stand-in's own budgets
        limits=ctx.chat.limits,
    )
    if ctx.turn.counted:
        named = [n for n in named if n[1] != "messages_per_minute"]
    if not named:
        ctx.turn.counted = True
        return None
    failed, told = await ctx.turn.storage.run(_take, ctx.turn.storage, named)
    if failed is not None:
        scope, metric, check = next(n for n in named if n[2] == failed)
        return _refusal(ctx, now, scope, metric, check, told)
    ctx.turn.counted = True
    if any(m == "model_calls_per_day" for _, m, _ in named):
        ctx.turn.reserved_calls += 1  # `request_counts` takes it back when the call ends
    return None


@dataclass(frozen=True, slots=True)
class Budget:
    """A chat's budget today, for `/settings`: what it spent of what is limited (None: that
    budget has no per-chat limit), and the model it is answered by while over it."""

    tokens: int | None
    cost: float | None
    standing_in: str | None


async def budget_today(ctx: MessageContext, now: datetime | None = None) -> Budget:
    """This chat's per-chat budgets today (`limits.per_chat`)."""
    values = ctx.chat.limits.per_chat
    _, _, day, _ = _windows(now or clock(), ctx.config.bot.timezone)
    msg = ctx.message

    def count(metric: str) -> int:
        return ctx.turn.storage.chat_state.count(
            Counter("chat", msg.platform, msg.chat_id, metric, day)
        )

    tokens = (
        await ctx.turn.storage.run(count, "tokens") if values.tokens_per_day is not None else None
    )
    cost = (
        await ctx.turn.storage.run(count, "cost") / MICROS
        if values.cost_per_day is not None
        else None
    )
    over = (tokens is not None and tokens >= (values.tokens_per_day or 0)) or (
        cost is not None and cost >= (values.cost_per_day or 0)
    )
    target = ctx.chat.downgrade_to
    return Budget(tokens, cost, target if over and target else None)
