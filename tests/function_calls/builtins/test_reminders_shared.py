"""Reminders when several workers share the table (in one process here: the race is forced;
tests/cluster/test_failover.py runs real worker processes)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.date import DateTrigger

from function_calls.builtins.reminders import ReminderService
from function_calls.builtins.reminders import scheduler as reminders_scheduler
from function_calls.builtins.reminders.service import reminders_table
from tests.function_calls.builtins.conftest import MakeBot
from tests.kit import until

RAN: list[str] = []


async def record(name: str) -> None:
    """A job function the job store can name (module:function)."""
    RAN.append(name)


async def test_a_wake_up_that_fails_does_not_stop_the_scheduler(make_bot: MakeBot) -> None:
    """A scheduler wake-up that raises (stock APScheduler then never arms its timer again: the
    later jobs would never run) is logged and tried again."""
    RAN.clear()
    tb, _ = await make_bot()
    scheduler = await tb.bot.service(ReminderService).scheduler()
    store = scheduler._lookup_jobstore("default")
    now = datetime.now(UTC)
    scheduler.add_job(record, DateTrigger(now + timedelta(seconds=0.2)), args=["first"], id="a")
    read_due = store.get_due_jobs
    failed: list[datetime] = []

    def fail_once(when: datetime) -> list:
        if not failed:
            failed.append(when)
            raise RuntimeError("the store is away")
        return read_due(when)

    store.get_due_jobs = fail_once
    monkey_retry = reminders_scheduler.RETRY_WAKEUP
    reminders_scheduler.RETRY_WAKEUP = 0.2
    try:
        await until(lambda: "first" in RAN, 4, "the job after the failed wake-up did not run")
    finally:
        reminders_scheduler.RETRY_WAKEUP = monkey_retry
    assert failed and RAN == ["first"]
    assert scheduler.get_jobs() == []


async def test_a_due_reminder_no_scheduler_knows_of_is_fired_by_the_sweep(
    make_bot: MakeBot,
) -> None:
    """A reminder set through another worker (its row only: that worker's scheduler held the
    job, and it died) is found by this worker's sweep and delivered once."""
    tb, outbox = await make_bot(config={"reminders": {"sweep_interval": 0.05}})
    service = tb.bot.service(ReminderService)
    sweeps: list[datetime] = []
    read_due = service._due_ids

    def counted(now: datetime) -> list[str]:
        sweeps.append(now)
        return read_due(now)

    service._due_ids = counted  # type: ignore[method-assign]
    due = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    with tb.bot.storage.engine.begin() as conn:
        conn.execute(
            reminders_table.insert().values(
                id=uuid.uuid4().hex,
                platform="test",
                chat_id="team1",
                chat_name="",
                is_group=True,
                creator_id="bob",
                creator_name="bob",
                text="stretch",
                kind="once",
                spec="in 1s",
                at=due.isoformat(),
                timezone="UTC",
                status="active",
                next_run=due,
                created_at=due,
                fired_count=0,
                note="",
            )
        )
    [out] = await outbox.wait(1, timeout=3)
    assert (out.chat_id, out.text) == ("team1", "⏰ Reminder: stretch")
    # Two more whole sweeps (a third has started): still once.
    seen = len(sweeps)
    await until(lambda: len(sweeps) >= seen + 3, 5, "the sweep stopped")
    assert len(outbox.messages) == 1
