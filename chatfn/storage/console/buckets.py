"""Time buckets of the console's charts. Rows are grouped in SQL by UTC hour (an expression
per dialect: SQLite keeps times as text, PostgreSQL as timestamps), then folded here into the
buckets asked for: hours, or days starting at midnight in `bot.timezone`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from sqlalchemy import func


def hour_of(column: Any, dialect: str) -> Any:
    """`YYYY-MM-DD HH` of a stored UTC time, as text."""
    if dialect == "postgresql":
        return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD HH24")
    return func.strftime("%Y-%m-%d %H", column)


def parse_hour(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H").replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Buckets:
    """The range [since, until) cut into `kind` buckets ("hour" or "day" in `zone`)."""

    kind: str
    zone: tzinfo
    since: datetime
    until: datetime

    @classmethod
    def last_days(cls, days: int, zone: tzinfo, now: datetime | None = None) -> Buckets:
        now = now or datetime.now(UTC)
        if days <= 2:
            start = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
            return cls("hour", zone, start - timedelta(hours=24 * days - 1), now)
        local = now.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        start = (local - timedelta(days=days - 1)).astimezone(UTC)
        return cls("day", zone, start, now)

    def starts(self) -> list[datetime]:
        """Every bucket's start (UTC), oldest first."""
        out = []
        if self.kind == "hour":
            t = self.since
            while t < self.until:
                out.append(t)
                t += timedelta(hours=1)
            return out
        day = self.since.astimezone(self.zone).date()
        last = self.until.astimezone(self.zone).date()
        while day <= last:
            midnight = datetime(day.year, day.month, day.day, tzinfo=self.zone)
            out.append(midnight.astimezone(UTC))
            day += timedelta(days=1)
        return out

    def of(self, hour: datetime) -> datetime:
        """The start of the bucket an hour (UTC) falls in."""
        if self.kind == "hour":
            return hour
        local = hour.astimezone(self.zone)
        midnight = datetime(local.year, local.month, local.day, tzinfo=self.zone)
        return midnight.astimezone(UTC)

    def of_time(self, when: datetime) -> datetime:
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        return self.of(when.astimezone(UTC).replace(minute=0, second=0, microsecond=0))
