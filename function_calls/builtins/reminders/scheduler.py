"""APScheduler as the reminder service uses it: jobs in memory, made from the `reminders`
table (the truth every worker process shares, README "Running more than one process") when the
scheduler starts and when this process sets a reminder. Not a job store on the database:
AsyncIOScheduler calls its store from the event loop, and no statement may run there
(chatfn/storage/loop_guard.py). A reminder set through another worker is found by the service's
sweep
of the table (`reminders.sweep_interval`); every worker starting up makes jobs for all active
rows, and the claim in `ReminderService.fire` decides which one delivers.

Imported only when a scheduler is first needed (a bot without reminders never loads
APScheduler's scheduler modules, bench/README.md).

A wake-up that fails is logged and retried: stock APScheduler raises out of the scheduler's
wake-up, which then never arms its timer again, and that scheduler would sleep forever.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from loguru import logger

# Seconds before a wake-up that failed (the database away) is tried again.
RETRY_WAKEUP = 5.0


# APScheduler 3 ships no types (its base class is Any to the checker).
class SharedStoreScheduler(AsyncIOScheduler):  # type: ignore[misc]
    """An AsyncIOScheduler whose wake-up never raises: it always arms the next one."""

    def _process_jobs(self) -> float | None:
        try:
            wait: float | None = super()._process_jobs()
            return wait
        except Exception as exc:
            logger.opt(exception=exc).error(
                "reminder scheduler wake-up failed; trying again in {:.0f} s", RETRY_WAKEUP
            )
            return RETRY_WAKEUP


def make_scheduler(timezone: tzinfo) -> SharedStoreScheduler:
    job_defaults: dict[str, Any] = {
        # The row decides lateness, so APScheduler must never skip a late job itself.
        "coalesce": True,
        "misfire_grace_time": None,
        "max_instances": 1,
    }
    return SharedStoreScheduler(
        job_defaults=job_defaults,
        timezone=timezone,
    )
