"""Overview and usage: counts per time bucket from the tables the bot writes anyway (messages,
model_usage, tool_calls, outbox), grouped in SQL by hour and chat, folded into buckets and
filtered by the user's scope here. Turn latency is the time from an incoming message to the
last of its replies written to the outbox (`reply_to`), so it covers the outbox's retention
(`storage.outbox.retention`, 7 days by default)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection, Engine

from chatfn.storage.console.buckets import Buckets, hour_of, parse_hour
from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import iso, utc
from chatfn.storage.models import messages_table, outbox_table, tool_calls_table, usage_table

M, U, T, OB = messages_table, usage_table, tool_calls_table, outbox_table


def _failed(column: Any) -> Any:
    return func.sum(case((column != "ok", 1), else_=0))


def percentile(values: list[float], q: float) -> float | None:
    """The `q` quantile (nearest rank) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return round(ordered[rank], 1)


def turn_latencies(
    conn: Connection, scope: Scope, since: datetime, until: datetime
) -> list[tuple[str, str, datetime, float]]:
    """(platform, chat id, incoming time, milliseconds to its last reply) of every incoming
    message since `since` that got a reply."""
    incoming = conn.execute(
        select(M.c.platform, M.c.chat_id, M.c.message_id, M.c.created_at).where(
            M.c.created_at >= since,
            M.c.created_at < until,
            M.c.role == "user",
            M.c.message_id != "",
            scope.clause(M.c.platform, M.c.chat_id),
        )
    ).all()
    if not incoming:
        return []
    last: dict[tuple[str, str, str], datetime] = {}
    rows = conn.execute(
        select(OB.c.platform, OB.c.chat_id, OB.c.payload, OB.c.created_at).where(
            OB.c.created_at >= since, scope.clause(OB.c.platform, OB.c.chat_id)
        )
    )
    for r in rows:
        reply_to = json.loads(r.payload).get("reply_to")
        if reply_to:
            key = (r.platform, r.chat_id, reply_to)
            when = utc(r.created_at)
            if key not in last or when > last[key]:
                last[key] = when
    out = []
    for r in incoming:
        if not scope.allows(r.platform, r.chat_id):
            continue
        done = last.get((r.platform, r.chat_id, r.message_id))
        if done is not None:
            start = utc(r.created_at)
            out.append((r.platform, r.chat_id, start, (done - start).total_seconds() * 1000))
    return out


def _zero() -> dict[str, Any]:
    return {
        "messages_in": 0,
        "messages_out": 0,
        "model_calls": 0,
        "model_errors": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "tokens": 0,
        "cost": None,
        "tool_calls": 0,
        "tool_errors": 0,
    }


def _add_cost(row: dict[str, Any], cost: float | None) -> None:
    if cost is not None:
        row["cost"] = (row["cost"] or 0.0) + float(cost)


def overview(engine: Engine, scope: Scope, buckets: Buckets) -> dict[str, Any]:
    """Totals and one row per bucket: messages in and out, model calls and errors, tokens,
    cost, tool calls and errors, turn latency p50/p95, active chats."""
    since, until = buckets.since, buckets.until
    series = {start: _zero() for start in buckets.starts()}
    active: dict[datetime, set[tuple[str, str]]] = defaultdict(set)
    latency: dict[datetime, list[float]] = defaultdict(list)
    total = _zero()
    with engine.connect() as conn:
        dialect = conn.dialect.name
        hour = hour_of(M.c.created_at, dialect)
        q = (
            select(hour, M.c.platform, M.c.chat_id, M.c.role, func.count())
            .where(M.c.created_at >= since, scope.clause(M.c.platform, M.c.chat_id))
            .group_by(hour, M.c.platform, M.c.chat_id, M.c.role)
        )
        for h, platform, chat_id, role, n in conn.execute(q):
            if not scope.allows(platform, chat_id):
                continue
            row = series.setdefault(buckets.of(parse_hour(h)), _zero())
            key = "messages_in" if role == "user" else "messages_out"
            row[key] += n
            total[key] += n
            if role == "user":
                active[buckets.of(parse_hour(h))].add((platform, chat_id))
        hour = hour_of(U.c.created_at, dialect)
        q = (
            select(
                hour,
                U.c.platform,
                U.c.chat_id,
                func.count(),
                _failed(U.c.outcome),
                func.sum(U.c.prompt_tokens),
                func.sum(U.c.completion_tokens),
                func.sum(U.c.cached_tokens),
                func.sum(U.c.cost),
            )
            .where(U.c.created_at >= since, scope.clause(U.c.platform, U.c.chat_id))
            .group_by(hour, U.c.platform, U.c.chat_id)
        )
        for h, platform, chat_id, n, bad, prompt, completion, cached, cost in conn.execute(q):
            if not scope.allows(platform, chat_id):
                continue
            row = series.setdefault(buckets.of(parse_hour(h)), _zero())
            for target in (row, total):
                target["model_calls"] += n
                target["model_errors"] += int(bad or 0)
                target["prompt_tokens"] += int(prompt or 0)
                target["completion_tokens"] += int(completion or 0)
                target["cached_tokens"] += int(cached or 0)
                target["tokens"] += int(prompt or 0) + int(completion or 0)
                _add_cost(target, cost)
        hour = hour_of(T.c.created_at, dialect)
        q = (
            select(hour, T.c.platform, T.c.chat_id, func.count(), _failed(T.c.outcome))
            .where(T.c.created_at >= since, scope.clause(T.c.platform, T.c.chat_id))
            .group_by(hour, T.c.platform, T.c.chat_id)
        )
        for h, platform, chat_id, n, bad in conn.execute(q):
            if not scope.allows(platform, chat_id):
                continue
            row = series.setdefault(buckets.of(parse_hour(h)), _zero())
            for target in (row, total):
                target["tool_calls"] += n
                target["tool_errors"] += int(bad or 0)
        turns = turn_latencies(conn, scope, since, until)
    for _platform, _chat, start, ms in turns:
        latency[buckets.of_time(start)].append(ms)
    every = [ms for *_, ms in turns]
    out = []
    for start in sorted(series):
        row = series[start]
        values = latency.get(start, [])
        out.append(
            {
                "t": iso(start),
                "messages_in": row["messages_in"],
                "messages_out": row["messages_out"],
                "model_calls": row["model_calls"],
                "model_errors": row["model_errors"],
                "tokens": row["tokens"],
                "cost": _money(row["cost"]),
                "tool_calls": row["tool_calls"],
                "latency_p50_ms": percentile(values, 0.5),
                "latency_p95_ms": percentile(values, 0.95),
                "active_chats": len(active.get(start, ())),
            }
        )
    chats = set().union(*active.values()) if active else set()
    calls = total["model_calls"]
    totals = {
        **total,
        "cost": _money(total["cost"]),
        "error_rate": round(total["model_errors"] / calls, 4) if calls else 0.0,
        "turns": len(every),
        "latency_p50_ms": percentile(every, 0.5),
        "latency_p95_ms": percentile(every, 0.95),
        "active_chats": len(chats),
    }
    return {"totals": totals, "series": out}


def _money(value: float | None) -> float | None:
    return round(value, 6) if value is not None else None


# -- usage --------------------------------------------------------------------------------------
GROUPS = ("model", "chat", "user")
SERIES_GROUPS = 8


def usage(
    engine: Engine,
    scope: Scope,
    buckets: Buckets,
    group_by: str,
    top: int = 10,
    names: dict[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """Tokens and cost per group (model, chat or user) and per bucket, the top chats and
    users; `rows` (for CSV) one per group and bucket. `names`: the names the plugins know for
    chats (`@plugin.chat_names`)."""
    since = buckets.since
    key_column = {"model": U.c.model_name, "chat": U.c.chat_id, "user": U.c.sender_id}[group_by]
    groups: dict[str, dict[str, Any]] = {}
    cells: dict[tuple[datetime, str], dict[str, Any]] = {}
    chats: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, None])
    users: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, None])
    with engine.connect() as conn:
        hour = hour_of(U.c.created_at, conn.dialect.name)
        q = (
            select(
                hour,
                U.c.platform,
                U.c.chat_id,
                U.c.sender_id,
                key_column.label("key"),
                func.count(),
                _failed(U.c.outcome),
                func.sum(U.c.prompt_tokens),
                func.sum(U.c.completion_tokens),
                func.sum(U.c.cached_tokens),
                func.sum(U.c.cost),
            )
            .where(U.c.created_at >= since, scope.clause(U.c.platform, U.c.chat_id))
            .group_by(hour, U.c.platform, U.c.chat_id, U.c.sender_id, key_column)
        )
        rows = conn.execute(q).all()
    for h, platform, chat_id, sender, key, n, bad, prompt, completion, cached, cost in rows:
        if not scope.allows(platform, chat_id):
            continue
        name = key if group_by == "model" else f"{platform}:{key}"
        group = groups.setdefault(name, _usage_group(name, group_by, platform, key))
        cell = cells.setdefault(
            (buckets.of(parse_hour(h)), name), _usage_group(name, group_by, platform, key)
        )
        tokens = int(prompt or 0) + int(completion or 0)
        for target in (group, cell):
            target["requests"] += n
            target["errors"] += int(bad or 0)
            target["prompt_tokens"] += int(prompt or 0)
            target["completion_tokens"] += int(completion or 0)
            target["cached_tokens"] += int(cached or 0)
            target["tokens"] += tokens
            _add_cost(target, cost)
        for table, k in ((chats, (platform, chat_id)), (users, (platform, sender))):
            table[k][0] += tokens
            if cost is not None:
                table[k][1] = (table[k][1] or 0.0) + float(cost)
    ordered = sorted(groups.values(), key=lambda g: (-g["tokens"], g["key"]))
    series = _usage_series(buckets, cells, ordered)
    totals = _usage_totals(ordered, group_by)
    for g in ordered:
        g["cost"] = _money(g["cost"])
    with engine.connect() as conn:
        chat_names, user_names = _labels(conn, chats, users, names or {})
    for g in ordered:
        if group_by == "chat":
            g["label"] = chat_names.get((g["platform"], g["chat_id"]), "")
        elif group_by == "user":
            g["label"] = user_names.get((g["platform"], g["key"].partition(":")[2]), "")
        else:
            g["label"] = g["key"]
    csv_rows = [
        {**cell, "bucket": iso(when), "cost": _money(cell["cost"])}
        for (when, _name), cell in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]
    return {
        "totals": {k: v for k, v in totals.items() if k not in ("key", "platform", "chat_id")}
        | {"cost": _money(totals["cost"])},
        "groups": ordered,
        "series": series,
        "top_chats": _top(chats, top, chat_names),
        "top_users": _top(users, top, user_names),
        "rows": csv_rows,
    }


def _usage_series(
    buckets: Buckets,
    cells: dict[tuple[datetime, str], dict[str, Any]],
    ordered: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Tokens and cost per bucket for the SERIES_GROUPS largest groups, the rest as "other"."""
    shown = [g["key"] for g in ordered[:SERIES_GROUPS]]
    names = shown + (["other"] if len(ordered) > SERIES_GROUPS else [])
    series = []
    for start in buckets.starts():
        tokens = dict.fromkeys(names, 0)
        costs: dict[str, float | None] = dict.fromkeys(names)
        for (when, name), cell in cells.items():
            if when != start:
                continue
            slot = name if name in shown else "other"
            tokens[slot] += cell["tokens"]
            if cell["cost"] is not None:
                costs[slot] = (costs[slot] or 0.0) + cell["cost"]
        series.append({"t": iso(start), "tokens": tokens, "cost": _round_all(costs)})
    return series


def _usage_totals(ordered: list[dict[str, Any]], group_by: str) -> dict[str, Any]:
    totals = _usage_group("", group_by, "", "")
    for g in ordered:
        for k in ("requests", "errors", "prompt_tokens", "completion_tokens"):
            totals[k] += g[k]
        totals["cached_tokens"] += g["cached_tokens"]
        totals["tokens"] += g["tokens"]
        _add_cost(totals, g["cost"])
    return totals


def _round_all(costs: dict[str, float | None]) -> dict[str, float | None]:
    return {k: _money(v) for k, v in costs.items()}


def _usage_group(name: str, group_by: str, platform: str, key: str) -> dict[str, Any]:
    return {
        "key": name,
        "platform": "" if group_by == "model" else platform,
        "chat_id": key if group_by == "chat" else "",
        "requests": 0,
        "errors": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "tokens": 0,
        "cost": None,
    }


def _top(
    table: dict[tuple[str, str], list[Any]], top: int, names: dict[tuple[str, str], str]
) -> list[dict[str, Any]]:
    ordered = sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [
        {
            "key": f"{p}:{k}",
            "label": names.get((p, k), ""),
            "platform": p,
            "id": k,
            "tokens": t,
            "cost": _money(c),
        }
        for (p, k), (t, c) in ordered
    ]


def _labels(
    conn: Connection,
    chats: dict[tuple[str, str], Any],
    users: dict[tuple[str, str], Any],
    names: dict[tuple[str, str], str],
) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Names people read: a chat's (one a plugin knows, `names`: a reminder's chat name; else
    a private chat's sender), a user's (the sender name of their latest message)."""
    chat_names = dict(names)
    user_names: dict[tuple[str, str], str] = {}
    ids = sorted({k for _, k in users})
    for start in range(0, len(ids), 500):
        rows = conn.execute(
            select(M.c.platform, M.c.sender_id, func.max(M.c.sender_name))
            .where(M.c.role == "user", M.c.sender_id.in_(ids[start : start + 500]))
            .group_by(M.c.platform, M.c.sender_id)
        ).all()
        user_names.update({(p, k): n for p, k, n in rows if (p, k) in users})
    for platform, chat_id in chats:
        if (platform, chat_id) not in chat_names and chat_id.startswith("private:"):
            who = user_names.get((platform, chat_id.partition(":")[2]))
            if who:
                chat_names[(platform, chat_id)] = who
    return chat_names, user_names
