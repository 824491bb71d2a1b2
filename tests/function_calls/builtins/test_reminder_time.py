"""Reading reminder times: pure functions, with `now` and the zone pinned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from function_calls.builtins.reminders.times import (
    ReminderTimeError,
    build_schedule,
    parse_once,
    split_leading_time,
)

TZ = ZoneInfo("Europe/Berlin")
NOW = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)  # 12:00 in Berlin
UTC_ZONE = ZoneInfo("UTC")
SUNDAY = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)  # midnight, a Sunday


@pytest.mark.parametrize(
    "text,expected",
    [
        ("in 10m", "2025-06-01 12:10"),
        ("in 1h 30m", "2025-06-01 13:30"),
        ("in 2 hours and 5 minutes", "2025-06-01 14:05"),
        ("tomorrow 9:00", "2025-06-02 09:00"),
        ("today 18:00", "2025-06-01 18:00"),
        ("09:30", "2025-06-02 09:30"),  # already past today: the next one
        ("13:00", "2025-06-01 13:00"),
        ("9pm", "2025-06-01 21:00"),
        ("2025-06-03 07:45", "2025-06-03 07:45"),
        ("2025-06-03T05:45:00+00:00", "2025-06-03 07:45"),
    ],
)
def test_once_forms(text: str, expected: str) -> None:
    assert parse_once(text, NOW, TZ).astimezone(TZ).strftime("%Y-%m-%d %H:%M") == expected


@pytest.mark.parametrize(
    "kind,at,weekday,cron,message",
    [
        ("once", "2024-01-01 09:00", None, None, "is in the past"),
        ("once", "2025-02-30 09:00", None, None, "is not a real date"),
        ("once", "2025-06-01 25:00", None, None, "not a valid time of day"),
        ("once", "2025-06-03", None, None, "has no time of day"),
        ("once", "yesterday", None, None, "cannot read the time"),
        ("once", None, None, None, "say when"),
        ("daily", None, None, None, "needs a time of day"),
        ("weekly", "09:00", "someday", None, "is not a weekday"),
        ("cron", None, None, "61 9 * * *", "bad cron expression"),
        ("cron", None, None, "0 9 *", "must have 5 fields"),
        ("cron", None, None, "0 9 31 2 *", "never fires"),
    ],
)
def test_refusals_say_what_to_send_instead(kind, at, weekday, cron, message) -> None:
    with pytest.raises(ReminderTimeError, match=message):
        build_schedule(kind, at, weekday, cron, NOW, TZ)


def test_recurring_first_runs() -> None:
    daily = build_schedule("daily", "08:30", None, None, NOW, TZ)
    assert daily.first_run.strftime("%Y-%m-%d %H:%M") == "2025-06-02 08:30"
    weekly = build_schedule("weekly", "9:00", "Monday,wed", None, NOW, TZ)
    assert (weekly.spec, weekly.first_run.strftime("%a %H:%M")) == ("mon,wed 09:00", "Mon 09:00")
    cron = build_schedule("cron", None, None, "0 9 * * 1-5", NOW, TZ)
    assert cron.first_run.strftime("%Y-%m-%d %H:%M") == "2025-06-02 09:00"


@pytest.mark.parametrize(
    "text,when,rest",
    [
        ("in 10m drink water", "in 10m", "drink water"),
        ("tomorrow 9:00 call mom", "tomorrow 9:00", "call mom"),
        ("2025-06-01 09:00 dentist", "2025-06-01 09:00", "dentist"),
        ("9:30 standup", "9:30", "standup"),
        ("in 2 hours and 5 min to stretch", "in 2 hours and 5 min", "stretch"),
        ("hello world", None, "hello world"),
    ],
)
def test_time_written_before_the_text(text: str, when: str | None, rest: str) -> None:
    assert split_leading_time(text) == (when, rest)


@pytest.mark.parametrize(
    "field,names",
    [
        ("1-5", "mon,tue,wed,thu,fri"),
        ("0", "sun"),
        ("7", "sun"),
        ("*/2", "tue,thu,sat,sun"),
        ("sat-mon", "mon,sat,sun"),
    ],
)
def test_cron_weekday_numbers_are_standard_cron(field: str, names: str) -> None:
    """APScheduler 3 counts Monday as 0; users write cron, where 1 is Monday."""
    from function_calls.builtins.reminders.times import cron_weekdays

    assert cron_weekdays(field) == names


def test_huge_relative_time_is_refused_not_a_crash() -> None:
    with pytest.raises(ReminderTimeError, match="5 years"):
        parse_once("in 99999999999w", SUNDAY, UTC_ZONE)


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        ("fri-mon", {4, 5, 6, 0}),  # wraps over the weekend
        ("sun-thu", {6, 0, 1, 2, 3}),  # a week that starts on Sunday
    ],
)
def test_weekly_wrapping_weekday_range(days: str, expected: set[int]) -> None:
    s = build_schedule("weekly", "09:00", days, None, SUNDAY, UTC_ZONE)
    fired = set()
    after = SUNDAY
    for _ in range(10):
        after = s.trigger.get_next_fire_time(None, after + timedelta(seconds=1))
        fired.add(after.weekday())
    assert fired == expected


def test_cron_day_of_month_and_weekday_mean_either() -> None:
    """Standard cron: with both day-of-month and weekday restricted, either one matching
    fires (crontab(5)); `0 9 1 * 1` is the 1st of each month and every Monday."""
    s = build_schedule("cron", None, None, "0 9 1 * 1", SUNDAY, UTC_ZONE)
    assert s.first_run == datetime(2025, 6, 1, 9, 0, tzinfo=UTC)  # the 1st, a Sunday
    nxt = s.trigger.get_next_fire_time(None, s.first_run + timedelta(seconds=1))
    assert nxt == datetime(2025, 6, 2, 9, 0, tzinfo=UTC)  # the next Monday


def test_relative_time_patterns_do_not_backtrack_exponentially() -> None:
    """`1hand` could be read as unit `hand` or as `h` + `and`, so each repetition doubled the
    regex work: ~150 characters in `/reminder_set` froze the event loop for minutes."""
    import time

    start = time.perf_counter()
    with pytest.raises(ReminderTimeError):
        parse_once("in " + "1hand " * 24 + "!", SUNDAY, UTC_ZONE)
    split_leading_time("in " + "1hand " * 24 + "5")
    assert time.perf_counter() - start < 1.0
    assert split_leading_time("in 1h and 30m call") == ("in 1h and 30m", "call")
    assert parse_once("in 1h and 30m", SUNDAY, UTC_ZONE) == SUNDAY + timedelta(minutes=90)
