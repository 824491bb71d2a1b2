"""The operator's other pages: usage (and its CSV), delivery (the outbox rows not delivered,
"retry now"), plugins (with what they report of themselves), and the config check. A plugin's
own pages are its console views (chatfn/runtime/console/views.py)."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatfn.common.config import zone_named
from chatfn.runtime.console import views
from chatfn.runtime.console.errors import ConsoleError
from chatfn.storage.console import delivery as outbox_store
from chatfn.storage.console import stats
from chatfn.storage.console.buckets import Buckets
from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import iso

if TYPE_CHECKING:
    from chatfn.runtime.console.bot_view import ConsoleBot as Bot  # the Bot, as a Protocol

CSV_COLUMNS = (
    "bucket",
    "key",
    "platform",
    "chat_id",
    "requests",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "tokens",
    "cost",
)
# Where `python -m chatfn` is importable from when the bot runs from a source checkout.
ROOT = Path(__file__).resolve().parents[3]
CHECK_TIMEOUT = 120.0


def buckets(bot: Bot, days: int) -> Buckets:
    return Buckets.last_days(days, zone_named(bot.settings.bot.timezone))


async def usage(bot: Bot, scope: Scope, group_by: str, days: int) -> dict[str, Any]:
    cut = buckets(bot, days)
    storage = bot.storage
    names = await storage.run_aside(views.chat_names, bot)  # the plugins' (`@plugin.chat_names`)
    found = await storage.run_aside(stats.usage, storage.engine, scope, cut, group_by, names=names)
    return {
        "group_by": group_by,
        "days": days,
        "bucket": cut.kind,
        "since": iso(cut.since),
        "until": iso(cut.until),
        **found,
    }


def usage_csv(found: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in found["rows"]:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in CSV_COLUMNS])
    return out.getvalue()


# -- delivery -------------------------------------------------------------------------------------
async def delivery(
    bot: Bot,
    scope: Scope,
    state: str,
    platform: str,
    chat_id: str,
    limit: int,
    before: int | None,
) -> dict[str, Any]:
    states = (
        outbox_store.UNDELIVERED
        if not state
        else ("pending", "expired", "failed", "delivered")
        if state == "all"
        else (state,)
    )
    storage = bot.storage
    return await storage.run_aside(
        outbox_store.page,
        storage.engine,
        scope,
        states,
        platform or None,
        chat_id or None,
        limit,
        before,
    )


async def retry(
    console: Any, scope: Scope, user: str, address: str, event_id: int
) -> dict[str, Any]:
    bot = console._bot
    storage = bot.storage
    row = await storage.run_aside(outbox_store.row, storage.engine, event_id)
    if row is None or not scope.allows(row.platform, row.chat_id):
        raise ConsoleError(404, f"no outbox row {event_id}")
    if row.state == "delivered":
        raise ConsoleError(409, f"outbox row {event_id} was delivered already")
    if row.state != "pending":
        await storage.run_aside(outbox_store.requeue, storage.engine, event_id)
    bot.outbox.kick()
    await console.audit(
        user,
        address,
        "delivery.retry",
        row.platform,
        row.chat_id,
        {"event_id": event_id, "was": row.state},
    )
    return {"ok": True, "event_id": event_id, "state": "pending"}


# -- plugins and the config check ------------------------------------------------------------------
def plugins(bot: Bot) -> dict[str, Any]:
    settings = bot.settings
    loaded = settings.plugins_loaded or bot.plugins
    out = []
    for p in loaded:
        status = p.state(settings)
        off = bot.guard.state(p.name)
        until = bot.guard.off_until(p.name)
        out.append(
            {
                "name": p.name,
                "builtin": p.builtin,
                "required": p.required,  # a built-in always on (REQUIRED_BUILTINS)
                "state": "off" if off else status.state,
                "status": off or status.detail,
                # Its breaker's cool-down ends then (None: it is not cooling down).
                "off_until": iso(datetime.fromtimestamp(until, UTC)) if until else None,
                "functions": sorted(s.name for s in p.specs()),
                # An installed package's or a declaring plugin's metadata (PluginMeta).
                "meta": dataclasses.asdict(p.meta) if p.meta is not None else None,
            }
        )
    skipped = [{"name": n, "why": why} for n, why in settings.plugins_skipped.items()]
    return {"plugins": out, "not_loaded": skipped, **views.health(bot, detail=True)}


async def check(console: Any, user: str, address: str, online: bool) -> dict[str, Any]:
    """`chatfn check --json` (what check_system.py reports) in a process of its own, on the
    running bot's config file: its probes open connections and build a bot of their own, which
    must not share this process's event loop or state."""
    bot = console._bot
    args = [sys.executable, "-m", "chatfn", "check", "--json"]
    config = bot.settings.config_file
    if config is not None:
        args += ["--config", str(config)]
    if online:
        args.append("--online")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=str(bot.settings.base_dir),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CHECK_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise ConsoleError(504, f"the check took longer than {CHECK_TIMEOUT:.0f} s") from None
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    try:
        report = json.loads(out.decode("utf-8"))
    except ValueError:
        text = (err or out).decode("utf-8", "replace").strip()
        report = {
            "ok": False,
            "checks": [{"name": "check", "status": "fail", "detail": text[-2000:]}],
        }
    lines = [
        {
            "status": "warn" if c["status"] == "warn" else c["status"],
            "text": f"{c['name']}: {c['detail']}",
        }
        for c in report.get("checks", [])
    ]
    mark = {"ok": "✓", "warn": "!", "fail": "✗"}
    await console.audit(user, address, "check", detail={"online": online, "ok": report.get("ok")})
    return {
        "ok": bool(report.get("ok")),
        "lines": lines,
        "text": "\n".join(f"{mark.get(x['status'], '?')} {x['text']}" for x in lines),
        "ran_at": iso(datetime.now(UTC)),
        "duration_ms": elapsed,
    }
