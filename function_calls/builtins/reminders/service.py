"""Reminders: a table that is the source of truth, and an APScheduler job per active reminder.

Why two stores: APScheduler's SQLAlchemy job store (on the bot's own database) wakes us at the
right moment and survives restarts, but it removes or advances a job *before* the job runs, and
it knows nothing about grace periods, creators or late notes. So the `reminders` table decides:
each firing claims its occurrence with a compare-and-set on `next_run` (one UPDATE), which makes
a duplicate wake-up (a job re-added after a crash, two schedulers on one file) a no-op. The cost
is at-most-once at the instant of a crash between that UPDATE and the channel send; a reminder
is never delivered twice. At start, every active row gets its job back if the store lost it,
and jobs whose row is gone are removed.

Several workers share the table and the job store. A scheduler wakes only for what it knows
of, so each worker also sweeps the table every `reminders.sweep_interval` seconds for due rows
(a reminder set through a worker that died before it fell due); the claim picks the one that
delivers. A wake-up that finds its job already run by another worker is not an error
(reminders/scheduler.py).

Due while the bot was down: delivered late with a note when within `reminders.grace_period`,
reported as missed after that, never dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.date import DateTrigger
from loguru import logger
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    select,
    update,
)

from function_calls import (
    IncomingMessage,
    OutgoingMessage,
    PluginDatabase,
    PluginHost,
    Tables,
    translate,
    zone_named,
)
from function_calls.builtins.reminders.phrases import ReminderTimeError
from function_calls.builtins.reminders.settings import ReminderSettings
from function_calls.builtins.reminders.times import (
    Kind,
    Schedule,
    build_schedule,
    fmt,
    next_fire,
)

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

# APScheduler's table of jobs, still made by the migrations: jobs now live in memory (scheduler()).
JOB_TABLE = "apscheduler_jobs"
SHORT_ID = 8
CATCH_UP = ":late"  # job id suffix of a recurring reminder's missed occurrence
# A firing more than this late (event loop busy, clock jump) says so even when the bot was up.
LATE_NOTE_AFTER = timedelta(seconds=60)
# A wake-up this much before the row's due time is stale (a job left from an earlier schedule).
EARLY_TOLERANCE = timedelta(seconds=2)
FIRED_KEPT = 100
# Due reminders one sweep fires at most (the rest in the next).
SWEEP_BATCH = 100


reminder_metadata = MetaData()

# One reminder. Times are naive UTC (SQLite has no zones; PostgreSQL gets the same). Declared
# with SQLAlchemy Core like the bot's own tables (chatfn/storage/models.py: the ORM is ~5 MB of
# memory).
reminders_table = Table(
    "reminders",
    reminder_metadata,
    Column("id", String(32), primary_key=True),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False, index=True),
    Column("chat_name", String(128), nullable=False, default=""),
    Column("is_group", Boolean, nullable=False, default=False),
    Column("creator_id", String(128), nullable=False, index=True),
    Column("creator_name", String(128), nullable=False, default=""),
    Column("text", Text, nullable=False),
    Column("kind", String(8), nullable=False),  # once | daily | weekly | cron
    Column("spec", String(128), nullable=False),  # as shown to users
    Column("at", String(64), nullable=True),  # ISO UTC / HH:MM[:SS]
    Column("weekday", String(64), nullable=True),
    Column("cron", String(128), nullable=True),
    Column("timezone", String(64), nullable=False),
    # active | done | deleted | missed | refused
    Column("status", String(16), nullable=False, default="active", index=True),
    Column("next_run", DateTime(), nullable=True),
    Column("created_at", DateTime(), nullable=False),
    Column("fired_count", Integer, nullable=False, default=0),
    Column("last_fired_at", DateTime(), nullable=True),
    Column("note", Text, nullable=False, default=""),
)
_R = reminders_table.c
#: The plugin's tables, created by the runtime (`Plugin(tables=TABLES)`, function_calls/tables.py).
TABLES = Tables(reminder_metadata)


@dataclass(frozen=True, slots=True)
class ReminderRow:
    """One row of `reminders`, as read (a snapshot: changes go through the service)."""

    id: str
    platform: str
    chat_id: str
    chat_name: str
    is_group: bool
    creator_id: str
    creator_name: str
    text: str
    kind: Kind  # as written by `schedule`
    spec: str
    at: str | None
    weekday: str | None
    cron: str | None
    timezone: str
    status: str
    next_run: datetime | None
    created_at: datetime
    fired_count: int
    last_fired_at: datetime | None
    note: str

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID]


class ReminderError(ReminderTimeError):
    """A request the service refuses; `text(language)` is shown to the user and the model."""


@dataclass(frozen=True, slots=True)
class Creator:
    platform: str
    chat_id: str
    chat_name: str
    is_group: bool
    user_id: str
    user_name: str


def utcnow() -> datetime:
    return datetime.now(UTC)


def _naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def _aware(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


def trigger_for(row: ReminderRow) -> BaseTrigger:
    """Rebuild a row's trigger (the same one it was validated with)."""
    tz = ZoneInfo(row.timezone)
    if row.kind == "once":
        return DateTrigger(run_date=_aware(datetime.fromisoformat(row.at or "")), timezone=tz)
    return build_schedule(
        row.kind,
        row.at,
        row.weekday,
        row.cron,
        utcnow(),
        tz,
    ).trigger


def describe(row: ReminderRow, tz: ZoneInfo | None = None, language: str = "en") -> str:
    """`Mon 2025-06-02 09:00 CEST` for one-off reminders, `daily 09:00 (next ...)` otherwise."""
    zone = tz or ZoneInfo(row.timezone)
    nxt = fmt(_aware(row.next_run), zone, language) if row.next_run else "—"
    if row.kind == "once":
        return nxt
    return translate(language, f"reminder.kind.{row.kind}", spec=row.spec, next=nxt)


# One service per running bot, found by its database URL: APScheduler persists only a function
# reference and arguments, so the job function needs a way back to the live service.
_services: dict[str, ReminderService] = {}


async def run_job(service_key: str, reminder_id: str) -> None:
    """The APScheduler job function (referenced by name in the job store)."""
    service = _services.get(service_key)
    if service is None and len(_services) == 1:  # the database file moved; only one candidate
        service = next(iter(_services.values()))
    if service is None:
        logger.error("reminder {} woke up but no reminder service is running", reminder_id)
        return
    await service.fire(reminder_id)


class ReminderService:
    """Creates, lists, deletes and fires reminders for one bot."""

    def __init__(self, host: PluginHost, settings: ReminderSettings, db: PluginDatabase) -> None:
        self.host = host
        self.settings = settings
        self.tz = zone_named(settings.timezone or host.settings.bot.timezone)
        # The plugin's own tables only (function_calls/plugin_data.py), not the whole Storage.
        self.db = db
        self.key = self.db.url
        # The table is the plugin's declared one (`Plugin(tables=TABLES)`): the runtime made it
        # before this setup ran.
        # Made on first need (an active reminder at start, or a new one): a bot without
        # reminders never imports the scheduler (~1.3 MB, bench/README.md).
        self._scheduler: AsyncIOScheduler | None = None
        self._started = False
        self._sweeper: asyncio.Task[None] | None = None
        self._offline: set[str] = set()  # due while the bot was down (found at start)
        # The latest deliveries of this process (tests, status); bounded: a bot runs for months.
        self.fired: deque[OutgoingMessage] = deque(maxlen=FIRED_KEPT)

    async def scheduler(self) -> AsyncIOScheduler:
        """APScheduler, made (and, once the service started, started) on first use. Its jobs
        live in memory: the reminders table is what survives a restart, and the jobs are
        made from its active rows when the scheduler starts. (A job store on the database
        would run its SQL on the event loop: AsyncIOScheduler calls its store from there.)"""
        if self._scheduler is None:
            from function_calls.builtins.reminders.scheduler import make_scheduler

            self._scheduler = make_scheduler(self.tz)
        if self._started and not self._scheduler.running:
            active = await self.db.run(self._rows, _R.status == "active")
            if not self._scheduler.running:
                self._run_scheduler(self._scheduler, active)
        return self._scheduler

    def _job_exists(self, job_id: str) -> bool:
        return self._scheduler is not None and self._scheduler.get_job(job_id) is not None

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the scheduler if a reminder is active (or one was made before the start), and
        the sweep for due reminders no wake-up of this process fired."""
        _services[self.key] = self
        self._started = True
        wanted = self._scheduler is not None
        if not wanted:
            wanted = bool(await self.db.run(self._rows, _R.status == "active"))
        if wanted:
            await self.scheduler()
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="reminder-sweep")

    async def _sweep_forever(self) -> None:
        """Every `reminders.sweep_interval` seconds, fire the active reminders that are due.

        The scheduler wakes this process for the jobs it knows of; a reminder set through
        another worker that died before it fell due (or whose wake-up was lost) has no
        scheduler left to wake for it. The table is the truth, so any live worker finds it
        here within one interval, and the claim in `fire` (a compare-and-set on the row)
        makes sure exactly one of the workers sweeping and waking delivers it."""
        while True:
            await asyncio.sleep(self.settings.sweep_interval)
            try:
                due = await self.db.run(self._due_ids, utcnow())
                for reminder_id in due:
                    await self.fire(reminder_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database away: the next sweep tries again
                logger.warning("reminder sweep failed: {}", exc)

    def _due_ids(self, now: datetime) -> list[str]:
        q = (
            select(_R.id)
            .where(_R.status == "active", _R.next_run <= _naive(now))
            .order_by(_R.next_run)
            .limit(SWEEP_BATCH)
        )
        with self.db.connect() as conn:
            return list(conn.execute(q).scalars())

    def _run_scheduler(self, scheduler: AsyncIOScheduler, rows: list[ReminderRow]) -> None:
        """Start the scheduler paused, give it a job for every active row, then run."""
        scheduler.start(paused=True)
        now = utcnow()
        active = {r.id: r for r in rows}
        jobs = {j.id for j in scheduler.get_jobs()}
        for job_id in jobs:
            if job_id.removesuffix(CATCH_UP) not in active:
                scheduler.remove_job(job_id)
        for row in active.values():
            overdue = row.next_run is not None and _aware(row.next_run) <= now
            if overdue:
                self._offline.add(row.id)
            if row.id not in jobs:
                self._add_job(row, scheduler)
            if overdue and row.kind != "once":
                # The recurring trigger only knows future occurrences; deliver the missed one now.
                scheduler.add_job(
                    run_job,
                    trigger=DateTrigger(run_date=now),
                    args=[self.key, row.id],
                    id=row.id + CATCH_UP,
                    replace_existing=True,
                )
        if self._offline:
            logger.info("{} reminder(s) fell due while the bot was down", len(self._offline))
        scheduler.resume()

    async def shutdown(self) -> None:
        self._started = False
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
            # AsyncIOScheduler.shutdown only queues the work (call_soon_threadsafe); let it run
            # before the caller disposes the engine the job store uses.
            await asyncio.sleep(0)
        if _services.get(self.key) is self:
            del _services[self.key]

    def _add_job(self, row: ReminderRow, scheduler: AsyncIOScheduler) -> None:
        # A one-off reminder whose time has passed still gets its DateTrigger: with no misfire
        # limit, APScheduler runs it at once, and `fire` adds the late note.
        scheduler.add_job(
            run_job,
            trigger=trigger_for(row),
            args=[self.key, row.id],
            id=row.id,
            name=f"reminder {row.short_id}",
            replace_existing=True,
        )

    # -- queries (synchronous: run through `Storage.run`, off the event loop) ---------------
    def _rows(self, *where: Any) -> list[ReminderRow]:
        q = select(reminders_table).where(*where).order_by(_R.next_run, _R.id)
        with self.db.connect() as conn:
            return [ReminderRow(**row._mapping) for row in conn.execute(q)]

    def get(self, reminder_id: str) -> ReminderRow | None:
        q = select(reminders_table).where(_R.id == reminder_id)
        with self.db.connect() as conn:
            row = conn.execute(q).first()
        return ReminderRow(**row._mapping) if row is not None else None

    def active_count(self, platform: str, user_id: str) -> int:
        q = (
            select(func.count())
            .select_from(reminders_table)
            .where(_R.platform == platform, _R.creator_id == user_id, _R.status == "active")
        )
        with self.db.connect() as conn:
            return conn.execute(q).scalar() or 0

    async def visible_to(
        self, platform: str, chat_id: str, is_group: bool, user_id: str
    ) -> list[ReminderRow]:
        """A group sees its own reminders; a private chat sees all its user's reminders."""
        base = [_R.platform == platform, _R.status == "active"]
        if is_group:
            return await self.db.run(self._rows, *base, _R.chat_id == chat_id)
        return await self.db.run(self._rows, *base, _R.creator_id == user_id)

    def resolve(self, prefix: str, candidates: list[ReminderRow]) -> ReminderRow:
        """Find a reminder by a unique id prefix among the ones the caller can see."""
        needle = prefix.strip().lower().lstrip("#")
        if not needle:
            raise ReminderError("reminder.no_id")
        found = [r for r in candidates if r.id.startswith(needle)]
        if not found:
            raise ReminderError("reminder.no_match", id=needle)
        if len(found) > 1:
            ids = ", ".join(r.short_id for r in found[:5])
            raise ReminderError("reminder.ambiguous", id=needle, count=len(found), ids=ids)
        return found[0]

    # -- changes -----------------------------------------------------------------------------
    def schedule(
        self, kind: str, at: str | None, weekday: str | None, cron: str | None
    ) -> Schedule:
        """Validate a schedule now (raises ReminderTimeError with the fix)."""
        return build_schedule(kind, at, weekday, cron, utcnow(), self.tz)  # type: ignore[arg-type]

    async def create(self, who: Creator, text: str, schedule: Schedule) -> ReminderRow:
        count = await self.db.run(self.active_count, who.platform, who.user_id)
        if count >= self.settings.max_per_user:
            raise ReminderError("reminder.max_per_user", max=self.settings.max_per_user)
        at: str | None = None
        if schedule.kind == "once":
            at = _naive(schedule.first_run).isoformat()
        elif schedule.kind in ("daily", "weekly"):
            at = schedule.spec.split()[-1]
        row = ReminderRow(
            id=uuid.uuid4().hex,
            platform=who.platform,
            chat_id=who.chat_id,
            chat_name=who.chat_name,
            is_group=who.is_group,
            creator_id=who.user_id,
            creator_name=who.user_name,
            text=text,
            kind=schedule.kind,
            spec=schedule.spec,
            at=at,
            weekday=_weekday_of(schedule),
            cron=schedule.spec if schedule.kind == "cron" else None,
            timezone=self.tz.key,
            status="active",
            next_run=_naive(schedule.first_run),
            created_at=_naive(utcnow()),
            fired_count=0,
            last_fired_at=None,
            note="",
        )
        # Made (and started) before the row exists, so its start finds nothing to repair.
        scheduler = await self.scheduler()
        await self.db.run(self._insert, row)
        self._add_job(row, scheduler)
        logger.bind(chat_id=who.chat_id).info(
            "reminder {} set by {} for {}", row.short_id, who.user_id, row.next_run
        )
        return row

    async def delete(self, row: ReminderRow) -> None:
        await self.db.run(self._set_status, row.id, "deleted", "deleted by a user")
        if self._job_exists(row.id) and self._scheduler is not None:
            self._scheduler.remove_job(row.id)

    def _insert(self, row: ReminderRow) -> None:
        with self.db.begin() as conn:
            conn.execute(reminders_table.insert().values(**asdict(row)))

    def _set_status(self, reminder_id: str, status: str, note: str) -> None:
        with self.db.begin() as conn:
            conn.execute(
                update(reminders_table).where(_R.id == reminder_id).values(status=status, note=note)
            )

    # -- firing ------------------------------------------------------------------------------
    async def fire(self, reminder_id: str) -> OutgoingMessage | None:
        """Deliver the reminder's due occurrence once: claim it, re-check, send."""
        now = utcnow()
        row = await self.db.run(self.get, reminder_id)
        if row is None or row.status != "active" or row.next_run is None:
            return None
        due = _aware(row.next_run)
        if due - now > EARLY_TOLERANCE:
            logger.info("reminder {} woke at {} but is due {}; ignored", row.short_id, now, due)
            return None
        nxt = None if row.kind == "once" else self._next_after(row, max(now, due))
        if not await self.db.run(self._claim, row, nxt, now):
            return None  # another wake-up already delivered this occurrence
        reason = await self._refusal(row)
        if reason is not None:
            await self.db.run(self._set_status, row.id, "refused", reason)
            if self._job_exists(row.id) and self._scheduler is not None:
                self._scheduler.remove_job(row.id)
            logger.bind(chat_id=row.chat_id).warning(
                "reminder {} not delivered: {}", row.short_id, reason
            )
            await self._audit(row, "refused", reason)
            return None
        lateness = now - due
        offline = row.id in self._offline
        self._offline.discard(row.id)
        text, status = self._text(row, due, nxt, lateness, offline)
        if status == "missed" and nxt is None:
            await self.db.run(self._set_status, row.id, "missed", text)
        out = OutgoingMessage(
            platform=row.platform,
            chat_id=row.chat_id,
            text=text,
            is_group=row.is_group,
            at=row.creator_id if row.is_group else None,
        )
        self.fired.append(out)
        await self._audit(
            row,
            "ok",
            f"late by {lateness.total_seconds():.1f} s" if lateness > EARLY_TOLERANCE else "",
        )
        await self.host.send(out)
        return out

    @staticmethod
    def _next_after(row: ReminderRow, after: datetime) -> datetime | None:
        """The occurrence after `after`, skipping a repeat of the same local wall-clock time:
        when clocks go back, APScheduler's CronTrigger yields 01:30 twice (before and after
        the change), and a reminder must not be delivered twice that night."""
        trigger = trigger_for(row)
        zone = ZoneInfo(row.timezone)
        wall = after.astimezone(zone).replace(tzinfo=None, microsecond=0)
        nxt = next_fire(trigger, after + timedelta(seconds=1))
        while nxt is not None and nxt.astimezone(zone).replace(tzinfo=None) <= wall:
            nxt = next_fire(trigger, nxt.astimezone(UTC) + timedelta(seconds=1))
        return nxt

    def _claim(self, row: ReminderRow, nxt: datetime | None, now: datetime) -> bool:
        """Claim this occurrence: exactly one wake-up wins, across processes. On PostgreSQL the
        row is locked first with SKIP LOCKED, so a second worker waking for the same occurrence
        moves on at once instead of queueing behind the lock; the compare-and-set on next_run
        then decides (and is the whole claim on SQLite, where one writer holds the file)."""
        same = (_R.id == row.id, _R.status == "active", _R.next_run == row.next_run)
        with self.db.begin() as conn:
            locked = conn.execute(
                select(_R.id).where(*same).with_for_update(skip_locked=True)
            ).scalar()
            if locked is None:
                return False
            result = conn.execute(
                update(reminders_table)
                .where(*same)
                .values(
                    next_run=_naive(nxt) if nxt else row.next_run,
                    status="active" if nxt else "done",
                    fired_count=_R.fired_count + 1,
                    last_fired_at=_naive(now),
                )
            )
            return result.rowcount == 1

    async def _refusal(self, row: ReminderRow) -> str | None:
        """Fire with the creator's permissions as they are now, not as they were."""
        msg = IncomingMessage(
            platform=row.platform,
            chat_id=row.chat_id,
            sender_id=row.creator_id,
            sender_name=row.creator_name,
            text="",
            is_group=row.is_group,
            chat_name=row.chat_name,
            message_id=f"reminder-{row.short_id}",
        )
        return await self.host.refusal_for("reminder_set", msg)

    def _text(
        self,
        row: ReminderRow,
        due: datetime,
        nxt: datetime | None,
        lateness: timedelta,
        offline: bool,
    ) -> tuple[str, str]:
        zone = ZoneInfo(row.timezone)
        lang = self.host.language_of(row.platform, row.chat_id, row.is_group)
        after = translate(lang, "reminder.next", when=fmt(nxt, zone, lang)) if nxt else ""
        due_s, late = fmt(due, zone, lang), _span(lateness)
        if lateness.total_seconds() > self.settings.grace_period:
            text = translate(
                lang, "reminder.missed", text=row.text, due=due_s, late=late, after=after
            )
            return text, "missed"
        if offline or lateness > LATE_NOTE_AFTER:
            why = translate(lang, "reminder.late_offline" if offline else "reminder.late_busy")
            text = translate(
                lang,
                "reminder.fire_late",
                text=row.text,
                due=due_s,
                late=late,
                why=why,
                after=after,
            )
            return text, "done"
        return translate(lang, "reminder.fire", text=row.text), "done"

    async def _audit(self, row: ReminderRow, outcome: str, detail: str) -> None:
        try:
            await self.db.audit(
                platform=row.platform,
                chat_id=row.chat_id,
                sender_id=row.creator_id,
                message_id=f"reminder-{row.short_id}",
                function="reminder_set",
                arguments={"id": row.id},
                source="scheduler",
                outcome=outcome,
                detail=detail,
            )
        except Exception as exc:  # the audit log must not stop a delivery
            logger.error("audit row for reminder {} not written: {}", row.short_id, exc)


def _weekday_of(schedule: Schedule) -> str | None:
    return schedule.spec.split()[0] if schedule.kind == "weekly" else None


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
