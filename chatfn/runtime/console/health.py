"""The health panel: where this process's turns run, its channels, what the plugins report
(`@plugin.health`: MCP servers), the outbox backlog, the event loop's lag and, on a gateway,
each worker's last metric snapshot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from chatfn.runtime.channel_host import channel_state
from chatfn.runtime.console import views
from chatfn.storage.console import delivery, sessions

if TYPE_CHECKING:
    from chatfn.runtime.console.bot_view import ConsoleBot as Bot  # the Bot, as a Protocol


async def health(console: Any, started_at: datetime) -> dict[str, Any]:
    bot = console._bot
    storage = bot.storage
    backlog = await storage.run_aside(delivery.backlog, storage.engine)
    shots = await storage.run_aside(sessions.snapshots, storage.engine)
    live: dict[str, datetime] = {}
    if shots:  # a worker is alive while it beats (chatfn/runtime/cluster.py, within half of this)
        within = bot.settings.broker.redelivery_timeout
        live = await storage.run_aside(sessions.live_workers, storage.engine, within)
    shown_since = datetime.now(UTC) - timedelta(days=1)
    workers = [
        {
            "id": worker,
            "host": host,
            "seen_at": sessions.iso(live.get(worker, taken)),
            "snapshot_at": sessions.iso(taken),
            "alive": worker in live,
        }
        | {k: v for k, v in data.items() if k != "raw"}
        for worker, host, taken, data in shots
        if worker in live or taken >= shown_since
    ]
    return {
        "role": {"single process": "single", "gateway+worker": "gateway"}.get(
            bot.switch.role, bot.switch.role
        ),
        "started_at": sessions.iso(started_at),
        "channels": [channel_state(n, s) for n, s in sorted(bot.delivery.channels.items())],
        # The plugins' own (`@plugin.health`): the MCP servers' states, ...
        **views.health(bot, detail=False),
        "outbox": backlog,
        "event_loop_lag_ms": console.lag.now_ms(),
        "workers": workers,
    }


async def worker_exposition(bot: Bot) -> str:
    """The workers' counters for the gateway's /metrics (chatfn/runtime/metric_snapshots.py)."""
    from chatfn.runtime.metric_snapshots import exposition

    storage = bot.storage
    shots = await storage.run_aside(sessions.snapshots, storage.engine)
    if not shots:
        return ""
    within = bot.settings.broker.redelivery_timeout
    live = await storage.run_aside(sessions.live_workers, storage.engine, within)
    shown_since = datetime.now(UTC) - timedelta(days=1)
    rows = [r for r in shots if r[0] in live or r[2] >= shown_since]
    return exposition(rows, set(live))
