"""Reading the times people and models write for reminders, and turning them into triggers.

Kept apart from the scheduling service because it is pure (no database, no loop): everything
here takes `now` and a zone explicitly, so the tests pin both. Every refusal is a
`ReminderTimeError` whose text tells the caller (a user or the model) what to send instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from function_calls import UNIT_SECONDS, WEEKDAY_NAMES
from function_calls.builtins.reminders.phrases import (
    ReminderTimeError,
    future_example,
    read_leading,
)

Kind = Literal["once", "daily", "weekly", "cron"]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_UNITS = UNIT_SECONDS["en"]
# "and" only after a space: `1hand` read as `h`+`and` or as `hand` made the match exponential.
_RELATIVE = re.compile(r"^in\s+((?:\d+\s*[a-z]+(?:\s+and\b)?\s*)+)$", re.IGNORECASE)
_REL_PART = re.compile(r"(\d+)\s*([a-z]+)", re.IGNORECASE)
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*(am|pm)?$", re.IGNORECASE)
_DAY_WORD = re.compile(r"^(today|tomorrow)(?:\s+(?:at\s+)?(.+))?$", re.IGNORECASE)
# Leading time expressions a slash-command user may put before the reminder text.
_LEADING = [
    re.compile(r"^(in\s+(?:\d+\s*[a-z]+(?:\s+and\b)?\s*)+?)(?:\s+(?:to\s+)?(?=\D)|$)", re.I),
    re.compile(
        r"^((?:today|tomorrow)(?:\s+(?:at\s+)?\d{1,2}(?::\d{2}){0,2}\s*(?:am|pm)?)?)"
        r"(?:\s+|$)",
        re.I,
    ),
    re.compile(r"^(\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}(?::\d{2})?)(?:\s+|$)"),
    re.compile(r"^(\d{1,2}:\d{2}(?:\s*(?:am|pm))?)(?:\s+|$)", re.I),
]
MAX_AHEAD = timedelta(days=366 * 5)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A validated schedule: what kind, the normalised spec shown to users, and its trigger."""

    kind: Kind
    spec: str  # "2025-06-01 09:00", "09:00", "mon,wed 09:00", "0 9 * * 1-5"
    trigger: BaseTrigger
    first_run: datetime  # aware, in the reminder's zone


def fmt(dt: datetime, tz: tzinfo, language: str = "en") -> str:
    """How a time is shown to users: local, to the minute (seconds only when they matter),
    with the weekday in the user's language."""
    local = dt.astimezone(tz)
    pattern = "%Y-%m-%d %H:%M:%S" if local.second else "%Y-%m-%d %H:%M"
    day = WEEKDAY_NAMES.get(language, WEEKDAY_NAMES["en"])[local.weekday()]
    return f"{day} {local.strftime(pattern)} {local.tzname()}"


def parse_clock(text: str) -> time:
    """`9:00`, `09:30`, `21:15:30`, `9pm`, `9:30 am` -> time."""
    m = _CLOCK.match(text.strip())
    if m is None:
        raise ReminderTimeError("time.bad_clock", text=text)
    hour, minute, second = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)
    meridiem = (m.group(4) or "").lower()
    if meridiem:
        if not 1 <= hour <= 12:
            raise ReminderTimeError("time.bad_clock", text=text)
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ReminderTimeError("time.bad_clock_range", text=text)
    return time(hour, minute, second)


def _localize(day: date, clock: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, clock).replace(tzinfo=tz)


def _parse_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ReminderTimeError("time.bad_date", text=text) from None


def parse_once(text: str, now: datetime, tz: ZoneInfo) -> datetime:
    """A single moment: `in 10m`, `in 1h 30m`, `tomorrow 9:00`, `today 18:00`, `09:30` (the next
    such time), `2025-06-01 09:00` or ISO 8601 with an offset. Returns an aware datetime."""
    raw = " ".join(text.strip().split())
    if not raw:
        raise ReminderTimeError("time.empty", example=future_example(now, tz))
    if m := _RELATIVE.match(raw):
        seconds = 0
        for amount, unit in _REL_PART.findall(m.group(1)):
            if unit.lower() not in _UNITS:
                raise ReminderTimeError(
                    "time.unreadable", text=raw, example=future_example(now, tz)
                )
            seconds += int(amount) * _UNITS[unit.lower()]
        if seconds <= 0:
            raise ReminderTimeError("time.unreadable", text=raw, example=future_example(now, tz))
        if seconds > MAX_AHEAD.total_seconds():  # also keeps timedelta from overflowing
            raise ReminderTimeError("time.too_far", example=future_example(now, tz))
        return now + timedelta(seconds=seconds)
    local_now = now.astimezone(tz)
    if m := _DAY_WORD.match(raw):
        day = local_now.date() + timedelta(days=1 if m.group(1).lower() == "tomorrow" else 0)
        clock = parse_clock(m.group(2)) if m.group(2) else time(9, 0)
        return _localize(day, clock, tz)
    if _CLOCK.match(raw):
        at = _localize(local_now.date(), parse_clock(raw), tz)
        return (
            at
            if at > now
            else _localize(local_now.date() + timedelta(days=1), parse_clock(raw), tz)
        )
    iso = raw.replace(" ", "T", 1) if re.match(r"^\d{4}-\d{2}-\d{2} ", raw) else raw
    if re.match(r"^\d{4}-\d{2}-\d{2}$", iso):
        raise ReminderTimeError("time.no_clock", text=raw)
    m = re.match(r"^(\d{4}-\d{2}-\d{2})T(.+)$", iso)
    if m is None:
        lead = read_leading(raw, now, tz)
        if lead is not None and lead.kind == "once" and not lead.rest and lead.when:
            return lead.when
        raise ReminderTimeError("time.unreadable", text=raw, example=future_example(now, tz))
    day = _parse_date(m.group(1))
    try:
        parsed = datetime.fromisoformat(f"{day.isoformat()}T{m.group(2)}")
    except ValueError:
        clock = parse_clock(m.group(2))  # raises a helpful message for a bad time of day
        parsed = datetime.combine(day, clock)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)


def parse_weekdays(text: str) -> str:
    """`mon`, `Monday`, `mon,wed,fri`, `mon-fri` -> the cron day_of_week field."""
    parts = []
    for token in re.split(r"[,\s]+", text.strip().lower()):
        if not token:
            continue
        ends = token.split("-")
        names = []
        for end in ends:
            short = end[:3]
            if short not in WEEKDAYS or (len(end) > 3 and not _full_day(end)):
                raise ReminderTimeError("time.bad_weekday", text=end)
            names.append(short)
        if len(names) > 2:
            raise ReminderTimeError("time.bad_weekday", text=token)
        first, last = WEEKDAYS.index(names[0]), WEEKDAYS.index(names[-1])
        if first > last:  # fri-mon, sun-thu: APScheduler only takes ranges within mon..sun
            names = [WEEKDAYS[i % 7] for i in range(first, last + 8)]
            parts.append(",".join(names))
            continue
        parts.append("-".join(names))
    if not parts:
        raise ReminderTimeError("time.needs_weekday")
    return ",".join(parts)


def _full_day(word: str) -> bool:
    return word in (
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "tues",
        "thur",
        "thurs",
        "weds",
    )


def cron_weekdays(field: str) -> str:
    """Standard cron weekday numbers (0 or 7 = Sunday, 1 = Monday) as day names.

    APScheduler 3 counts 0 = Monday, also in `CronTrigger.from_crontab`, so `0 9 * * 1-5` would
    fire Tuesday to Saturday (agronholm/apscheduler#286). Names mean the same to both.
    """
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.lower().split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else 1
        if step_text and not (step_text.isdigit() and int(step_text) > 0):
            raise ReminderTimeError("time.bad_cron", text=field, error=f"step {step_text!r}")
        if base in ("*", "?"):
            span = list(range(0, 7))
        elif "-" in base:
            first, last = (_cron_day(x, field) for x in base.split("-", 1))
            span = (
                list(range(first, last + 1))
                if first <= last
                else [*range(first, 7), *range(0, last + 1)]
            )
        else:
            span = [_cron_day(base, field)]
        days.update(d % 7 for d in span[::step])
    order = (1, 2, 3, 4, 5, 6, 0)
    names = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
    return ",".join(n for d, n in zip(order, names, strict=True) if d in days)


def _cron_day(token: str, field: str) -> int:
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token)
    if token[:3] in WEEKDAYS:
        return (WEEKDAYS.index(token[:3]) + 1) % 7
    raise ReminderTimeError("time.bad_cron", text=field, error=f"{token!r} is not a day")


def next_fire(trigger: BaseTrigger, after: datetime) -> datetime | None:
    """The first fire time of `trigger` at or after `after` (aware)."""
    fire: datetime | None = trigger.get_next_fire_time(None, after)  # APScheduler is untyped
    return fire


def build_schedule(
    kind: Kind, at: str | None, weekday: str | None, cron: str | None, now: datetime, tz: ZoneInfo
) -> Schedule:
    """Validate what was asked and build the trigger; raises ReminderTimeError with a fix."""
    if kind == "once":
        if not at:
            raise ReminderTimeError("time.say_when", example=future_example(now, tz))
        when = parse_once(at, now, tz)
        if when <= now:
            raise ReminderTimeError(
                "time.past", when=fmt(when, tz), now=fmt(now, tz), example=future_example(now, tz)
            )
        if when - now > MAX_AHEAD:
            raise ReminderTimeError("time.too_far", example=future_example(now, tz))
        return Schedule("once", fmt(when, tz), DateTrigger(run_date=when, timezone=tz), when)
    if kind in ("daily", "weekly"):
        if not at:
            raise ReminderTimeError("time.needs_clock", kind=kind)
        clock = parse_clock(at)
        fields: dict[str, int | str] = {
            "hour": clock.hour,
            "minute": clock.minute,
            "second": clock.second,
        }
        spec = clock.strftime("%H:%M:%S" if clock.second else "%H:%M")
        if kind == "weekly":
            days = parse_weekdays(weekday or "")
            fields["day_of_week"] = days
            spec = f"{days} {spec}"
        trigger = CronTrigger(timezone=tz, **fields)
    else:
        if not cron or not cron.strip():
            raise ReminderTimeError("time.needs_cron")
        expr = " ".join(cron.split())
        if len(expr.split()) != 5:
            raise ReminderTimeError("time.cron_fields", text=expr)
        try:
            minute, hour, day, month, dow = expr.split()
            trigger = CronTrigger(
                minute=minute,
                hour=hour,
                day=day,
                month=month,
                day_of_week=cron_weekdays(dow),
                timezone=tz,
            )
            if day not in ("*", "?") and dow not in ("*", "?"):
                # crontab(5): with both day fields restricted, either one matching fires;
                # APScheduler requires both, so `0 9 1 * 1` would be only Mondays that are 1sts.
                trigger = OrTrigger(
                    [
                        CronTrigger(minute=minute, hour=hour, day=day, month=month, timezone=tz),
                        CronTrigger(
                            minute=minute,
                            hour=hour,
                            month=month,
                            day_of_week=cron_weekdays(dow),
                            timezone=tz,
                        ),
                    ]
                )
        except ValueError as exc:
            raise ReminderTimeError("time.bad_cron", text=expr, error=str(exc)) from None
        spec = expr
    first = next_fire(trigger, now)
    if first is None:
        raise ReminderTimeError("time.never", kind=kind, text=spec)
    return Schedule(kind, spec, trigger, first)


def split_leading_time(text: str) -> tuple[str | None, str]:
    """For `/reminder_set in 10m stretch`: the time expression at the start, and the rest."""
    stripped = text.strip()
    for pattern in _LEADING:
        m = pattern.match(stripped)
        if m and m.group(1).strip():
            rest = stripped[m.end() :].strip()
            return m.group(1).strip(), rest
    return None, stripped
