"""The reminders page of the admin console, declared with the plugin's `Plugin(console=...)`:
`GET /admin/api/reminders` (the active, or all, reminders of the chats the user may see) and
`DELETE /admin/api/reminders/{id}` (as `/reminder_delete`: the row `deleted`, this process's
job removed, an audit row), and the page module `static/reminders.js` with its words."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError

from function_calls import (
    ConsoleCall,
    ConsoleRefused,
    ConsoleRoute,
    ConsoleScope,
    ConsoleView,
    PluginDatabase,
    PluginHost,
)
from function_calls.builtins.reminders.service import TABLES, ReminderService, reminders_table

R = reminders_table


def _iso(value: datetime | None) -> str | None:
    """A stored time as the console's API writes every time: ISO 8601, UTC, with `Z`."""
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _rows(db: PluginDatabase, scope: ConsoleScope, active_only: bool) -> list[dict[str, Any]]:
    q = select(R).order_by(R.c.next_run, R.c.id)
    if active_only:
        q = q.where(R.c.status == "active")
    q = q.where(scope.clause(R.c.platform, R.c.chat_id))
    with db.connect() as conn:
        rows = conn.execute(q).all()
    return [
        {
            "id": x.id,
            "platform": x.platform,
            "chat_id": x.chat_id,
            "chat_name": x.chat_name,
            "is_group": bool(x.is_group),
            "creator_id": x.creator_id,
            "creator_name": x.creator_name,
            "text": x.text,
            "kind": x.kind,
            "spec": x.spec,
            "timezone": x.timezone,
            "status": x.status,
            "next_run": _iso(x.next_run),
            "created_at": _iso(x.created_at),
            "fired_count": x.fired_count,
            "last_fired_at": _iso(x.last_fired_at),
        }
        for x in rows
        if scope.allows(x.platform, x.chat_id)
    ]


def _database(host: PluginHost) -> PluginDatabase:
    """The plugin's tables (function_calls/plugin_data.py): its service's view, or one made
    through the plugin door (`PluginDatabase.of`, what `plugin.database` makes) for a
    console whose bot has the plugin switched off."""
    service: ReminderService | None = host.service(ReminderService)
    if service is not None:
        return service.db
    return PluginDatabase.of(host, "reminders", TABLES)


def chat_names(host: PluginHost) -> dict[tuple[str, str], str]:
    """The chat name each reminder was set with, by chat (`@plugin.chat_names`: the console's
    chat list, chat page and usage page show it); none without the table (the plugin never
    ran on this database)."""
    db = _database(host)
    try:
        with db.connect() as conn:
            rows = conn.execute(
                select(R.c.platform, R.c.chat_id, R.c.chat_name).where(R.c.chat_name != "")
            ).all()
    except DBAPIError:  # no reminders table
        return {}
    return {(r.platform, r.chat_id): r.chat_name for r in rows}


async def listing(call: ConsoleCall) -> dict[str, Any]:
    status = call.choice("status", ("active", "all"), "active")
    db = _database(call.host)
    rows = await db.run_aside(_rows, db, call.scope, status != "all")
    platform, chat_id = call.query.get("platform"), call.query.get("chat_id")
    return {
        "reminders": [
            r
            for r in rows
            if (not platform or r["platform"] == platform)
            and (not chat_id or r["chat_id"] == chat_id)
        ]
    }


def _one(db: PluginDatabase, reminder_id: str) -> Any:
    with db.connect() as conn:
        return conn.execute(
            select(R.c.id, R.c.platform, R.c.chat_id, R.c.status).where(R.c.id == reminder_id)
        ).first()


def _deactivate(db: PluginDatabase, reminder_id: str, note: str) -> bool:
    with db.begin() as conn:
        done = conn.execute(
            update(R)
            .where(R.c.id == reminder_id, R.c.status == "active")
            .values(status="deleted", note=note)
        )
    return bool(done.rowcount)


async def cancel(call: ConsoleCall) -> dict[str, Any]:
    """As `/reminder_delete`: the row `deleted` (a worker about to fire it re-reads the row and
    does not), and this process's scheduler job removed when it runs the reminders."""
    rid = call.params["id"]
    db = _database(call.host)
    found = await db.run_aside(_one, db, rid)
    if found is None or not call.scope.allows(found.platform, found.chat_id):
        raise ConsoleRefused(404, f"no reminder {rid}")
    note = f"deleted in the admin console by {call.user}"
    if not await db.run_aside(_deactivate, db, rid, note):
        raise ConsoleRefused(409, f"reminder {rid} is not active ({found.status})")
    service = call.host.service(ReminderService)
    if service is not None and service._scheduler is not None and service._job_exists(rid):
        service._scheduler.remove_job(rid)
    await call.audit("reminder.cancel", found.platform, found.chat_id, {"id": rid})
    return {"ok": True, "id": rid, "status": "deleted"}


VIEW = ConsoleView(
    "reminders",
    routes=[
        ConsoleRoute("GET", "reminders", listing),
        ConsoleRoute("DELETE", "reminders/{id}", cancel),
    ],
    page=Path(__file__).resolve().parent / "static" / "reminders.js",
    texts={
        "en": {
            "nav.reminders": "Reminders",
            "reminders.cancel": "Cancel",
            "reminders.cancel_confirm": "Cancel the reminder “{text}”?",
            "reminders.chat": "Chat",
            "reminders.creator": "Set by",
            "reminders.fired": "Fired",
            "reminders.next_run": "Next",
            "reminders.show_all": "Show cancelled and finished too",
            "reminders.status": "Status",
            "reminders.text": "Text",
            "reminders.when": "When",
        },
        "zh": {
            "nav.reminders": "提醒",
            "reminders.cancel": "取消",
            "reminders.cancel_confirm": "取消提醒“{text}”？",
            "reminders.chat": "会话",
            "reminders.creator": "设置者",
            "reminders.fired": "已触发",
            "reminders.next_run": "下次",
            "reminders.show_all": "同时显示已取消和已结束的",
            "reminders.status": "状态",
            "reminders.text": "内容",
            "reminders.when": "时间",
        },
    },
)
