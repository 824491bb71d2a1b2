"""The times people write in front of a reminder, in English and Chinese.

`read_leading("明天早上9点 开会", now, tz)` -> a `Leading` (when, or a daily/weekly clock) and
the rest of the line (the reminder's text). What is understood:

- relative: `in 10m`, `in an hour`, `in 1h 30m`, `in half an hour`, `10分钟后`, `半小时后`,
  `两小时后`, `1个半小时后`
- a clock with or without a day: `5pm`, `at 17:30`, `tonight 8pm`, `tomorrow 9:00`,
  `明天 9:00`, `明天早上9点`, `下午3点`, `今晚8点`, `9点半`
- weekdays: `next friday 10am`, `on monday`, `下周五 10:00`, `周一 9:00`, `星期三下午2点`
- recurring: `every day 8:00`, `daily 8:00`, `every weekday 9:00`, `every mon 9:00`,
  `每天 8:00`, `每周一 9:00`, `工作日 9:00`
- ISO dates: `2025-06-01 09:00`, `2025-06-01T09:00+02:00`

Why hand-written rather than dateparser: dateparser cannot split the time from the text that
follows it, and its first call takes seconds. Every pattern here is anchored and free of nested
quantifiers, and only the first `WINDOW` characters are ever scanned, so a line of any length
is read in bounded time (a hypothesis test holds it to that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from function_calls import UNIT_SECONDS, translate

WINDOW = 64  # no time expression is longer; the text after it is never scanned
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_EN_DAYS = (
    r"(mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)"
)
_ZH_DAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "七": 6}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_ZH_DIGITS |= {"六": 6, "七": 7, "八": 8, "九": 9}
_ZH_NUM = r"(?:\d{1,12}|[零〇一二两三四五六七八九十]{1,3})"
_EN_UNITS = UNIT_SECONDS["en"]
_ZH_UNITS = UNIT_SECONDS["zh"]

_I = re.IGNORECASE
_SP = re.compile(r"[\s,，:：]*")
_ISO = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[ T](\d{1,2}:\d{2}(?::\d{2})?)(Z|[+-]\d{2}:?\d{2})?)?(?![\d:])"
)
# recurring
_EN_DAILY = re.compile(r"(?:every\s*day|daily|each\s+day)\b", _I)
_EN_WORKDAYS = re.compile(r"(?:every\s+weekday|on\s+weekdays|weekdays)\b", _I)
_EN_EVERY_DAY = re.compile(r"(?:every|each)\s+" + _EN_DAYS + r"\b", _I)
_ZH_DAILY = re.compile(r"每天|每日")
_ZH_WORKDAYS = re.compile(r"(?:每个?)?工作日")
_ZH_EVERY_DAY = re.compile(r"每(?:个)?(?:周|星期|礼拜)([一二三四五六日天七])")
# relative
_EN_REL = re.compile(r"in\s+", _I)
_EN_AMOUNT = re.compile(
    r"(?:and\s+)?(?:(\d{1,12})\s*([a-z]{1,7})|(an?|one)\s+([a-z]{1,7})|(half)\s+an?\s+(hour))(?![a-z])",
    _I,
)
_ZH_REL = re.compile(
    r"(" + _ZH_NUM + r"|半)\s*(?:个)?(半)?\s*(秒钟|秒|分钟|分|小时|钟头|天|日|周|星期|礼拜)"
    r"(半)?\s*(?:后|以后|之后)"
)
# days
_EN_DAYWORD = re.compile(r"(today|tonight|tomorrow|tmr|this\s+(?:morning|afternoon|evening))\b", _I)
_EN_WEEKDAY = re.compile(r"(?:(next|this|on)\s+)?" + _EN_DAYS + r"\b", _I)
_ZH_DAYWORD = re.compile(r"(今天|今日|今晚|今早|明天|明日|明早|明晚|后天)")
_ZH_WEEKDAY = re.compile(r"(下下|下|这|本)?(?:个)?(?:周|星期|礼拜)([一二三四五六日天七])")
# clocks
_EN_CLOCK = re.compile(
    r"(at\s+)?(\d{1,2})(?:(?::|\.)(\d{2}))?(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?(?![\d:])", _I
)
_ZH_PERIOD = re.compile(r"(凌晨|早上|早晨|上午|中午|下午|傍晚|晚上|夜里)")
_ZH_CLOCK = re.compile(
    r"(" + _ZH_NUM + r")\s*(?:点|点钟|時|时)(?:\s*(半|一刻|三刻|(" + _ZH_NUM + r")\s*分?))?"
)
_COLON_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?!\d)")
_FILLER = re.compile(r"(?:(?:to|that)\s+|提醒我|提醒|叫我)", _I)


class ReminderTimeError(ValueError):
    """A time, date or cron expression that cannot be used. `key` names the catalogue text
    (which says what would work) and `fmt` fills it; `str()` is the English text, `text(lang)`
    the text in the chat's language."""

    def __init__(self, key: str, **fmt: object) -> None:
        self.key = key
        self.fmt = fmt
        super().__init__(self.text("en"))

    def text(self, language: str) -> str:
        fmt = {"example": "2030-01-01 09:00", **self.fmt}
        return translate(language, self.key, **fmt)


@dataclass(frozen=True, slots=True)
class Leading:
    """What the start of a line says. `kind` once: `when`; daily/weekly: `clock` (+ `weekday`,
    a cron day-of-week field such as "mon-fri")."""

    kind: Literal["once", "daily", "weekly"]
    rest: str
    when: datetime | None = None
    clock: time | None = None
    weekday: str | None = None


def zh_number(text: str) -> int:
    """`12`, `十二`, `二十`, `两` -> int (the Chinese numerals of clocks and durations)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0))
    value = 0
    for ch in text:
        value = value * 10 + _ZH_DIGITS.get(ch, 0)
    return value


def _clock(hour: int, minute: int, second: int = 0) -> time:
    if hour == 24 and minute == 0 and second == 0:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        raise ReminderTimeError("time.bad_clock", text=f"{hour}:{minute:02d}")
    return time(hour, minute, second)


def _apply_period(hour: int, period: str | None) -> int:
    """下午3点 -> 15, 晚上8点 -> 20, 中午1点 -> 13, tonight 8 -> 20."""
    if period in ("下午", "傍晚", "晚上", "夜里", "pm", "evening") and hour < 12:
        return hour + 12
    if period == "中午" and hour < 11:
        return hour + 12
    if period in ("凌晨", "早上", "早晨", "上午", "am", "morning") and hour == 12:
        return 0
    return hour


class _Scan:
    """A cursor over the window; each `take` matches one anchored pattern at the cursor."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def take(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        m = pattern.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
        return m

    def skip_space(self) -> None:
        self.pos = _SP.match(self.text, self.pos).end()  # type: ignore[union-attr]


def _read_clock(scan: _Scan, period: str | None, *, bare_ok: bool) -> time | None:
    """A clock at the cursor: `9:00`, `5pm`, `at 17:30`, `9点半`, `下午3点`. A bare number
    (`5`) counts only after `at` or a day word (`tonight 8`), never on its own."""
    start = scan.pos
    scan.skip_space()
    if m := scan.take(_ZH_PERIOD):
        period = m.group(1)
        scan.skip_space()
    if m := scan.take(_ZH_CLOCK):
        hour = zh_number(m.group(1))
        minute = {"半": 30, "一刻": 15, "三刻": 45}.get(m.group(2) or "", 0)
        if m.group(3):
            minute = zh_number(m.group(3))
        return _clock(_apply_period(hour, period), minute)
    if m := scan.take(_EN_CLOCK):
        has_at, hour_s, minute_s, second_s, meridiem = m.groups()
        if minute_s is None and meridiem is None and not (has_at or bare_ok or period):
            scan.pos = start
            return None
        hour, minute, second = int(hour_s), int(minute_s or 0), int(second_s or 0)
        if meridiem:
            if not 1 <= hour <= 12:
                raise ReminderTimeError("time.bad_clock", text=m.group(0).strip())
            hour = hour % 12 + (12 if meridiem.lower().startswith("p") else 0)
        else:
            hour = _apply_period(hour, period)
        return _clock(hour, minute, second)
    scan.pos = start
    return None


def _next_clock(now: datetime, clock: time, tz: ZoneInfo) -> datetime:
    local = now.astimezone(tz)
    at = datetime.combine(local.date(), clock, tzinfo=tz)
    return at if at > now else datetime.combine(local.date() + timedelta(days=1), clock, tzinfo=tz)


def _weekday_date(today: date, target: int, which: str | None, zh: bool) -> date:
    """`周五`/`friday`: the next such day (today counts; `_day_and_clock` moves it a week on
    when today's time has passed); `下周五`: Friday of next week;
    `next friday`: the next Friday after today; `this friday`/`这周五`: this week's."""
    if zh and which in ("下", "下下"):
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=len(which))
        return monday + timedelta(days=target)
    if which in ("这", "本", "this"):
        return today - timedelta(days=today.weekday()) + timedelta(days=target)
    ahead = (target - today.weekday()) % 7
    if which == "next" and ahead == 0:
        ahead = 7
    return today + timedelta(days=ahead)


def _en_day(name: str) -> int:
    return WEEKDAYS.index(name[:3].lower())


def _rest(scan: _Scan, original: str) -> str:
    scan.skip_space()
    scan.take(_FILLER)
    return original[scan.pos :].strip()


class _NotThisForm:
    """A reader's answer when the line does not start with its form (nothing consumed)."""


_NOT_THIS_FORM = _NotThisForm()
_Read = Leading | None | _NotThisForm


def read_leading(text: str, now: datetime, tz: ZoneInfo) -> Leading | None:
    """The schedule at the start of `text` and the rest of the line, or None when the line does
    not start with a time. Raises ReminderTimeError for a recognised but impossible time.

    Each form has its reader, tried in order; the first whose form the line starts with
    decides (a Leading, or None for a form begun but not completed: "every day" with no clock).
    """
    original = text.lstrip()
    scan = _Scan(original[:WINDOW])
    for reader in (_iso, _recurring, _en_relative, _zh_relative):
        found = reader(scan, original, now, tz)
        if not isinstance(found, _NotThisForm):
            return found
    return _day_and_clock(scan, original, now, tz)


def _iso(scan: _Scan, original: str, now: datetime, tz: ZoneInfo) -> _Read:
    """An ISO date, with or without a time and offset."""
    m = scan.take(_ISO)
    if not m:
        return _NOT_THIS_FORM
    day_s, clock_s, offset = m.groups()
    try:
        day = date.fromisoformat(day_s)
    except ValueError:
        raise ReminderTimeError("time.bad_date", text=day_s) from None
    if clock_s is None:
        raise ReminderTimeError("time.no_clock", text=day_s)
    parts = [int(p) for p in clock_s.split(":")]
    clock = _clock(*parts)
    when = datetime.combine(day, clock, tzinfo=tz)
    if offset:
        when = datetime.fromisoformat(f"{day_s}T{clock.isoformat()}{offset.replace('Z', '+00:00')}")
    return Leading("once", _rest(scan, original), when=when)


def _recurring(scan: _Scan, original: str, now: datetime, tz: ZoneInfo) -> _Read:
    """Every day, every workday, every Monday (English or Chinese), then a clock."""
    recurring: str | None = None
    if scan.take(_EN_DAILY) or scan.take(_ZH_DAILY):
        recurring = "*"
    elif scan.take(_EN_WORKDAYS) or scan.take(_ZH_WORKDAYS):
        recurring = "mon-fri"
    elif m := scan.take(_EN_EVERY_DAY):
        recurring = WEEKDAYS[_en_day(m.group(1))]
    elif m := scan.take(_ZH_EVERY_DAY):
        recurring = WEEKDAYS[_ZH_DAY[m.group(1)]]
    if recurring is None:
        return _NOT_THIS_FORM
    clock = _read_clock(scan, None, bare_ok=True)
    if clock is None:
        return None
    if recurring == "*":
        return Leading("daily", _rest(scan, original), clock=clock)
    return Leading("weekly", _rest(scan, original), clock=clock, weekday=recurring)


def _en_relative(scan: _Scan, original: str, now: datetime, tz: ZoneInfo) -> _Read:
    """ "in 10 minutes", "in an hour and a half", "in 2h 30m"."""
    if not scan.take(_EN_REL):
        return _NOT_THIS_FORM
    seconds = 0
    while (amount := _en_amount(scan)) is not None:
        seconds += amount
        before = scan.pos
        scan.skip_space()
        if scan.pos < len(scan.text) and not _EN_AMOUNT.match(scan.text, scan.pos):
            scan.pos = before
            break
    if seconds <= 0:
        return None
    return Leading("once", _rest(scan, original), when=_ahead(now, seconds))


def _en_amount(scan: _Scan) -> int | None:
    """The seconds of one English amount at the scan's position, or None (nothing consumed)."""
    before = scan.pos
    m = scan.take(_EN_AMOUNT)
    if m is None:
        return None
    amount_s, unit, _article, unit2, half, _hour = m.groups()
    if half:
        return 1800
    if (unit or unit2).lower() in _EN_UNITS:
        return int(amount_s or 1) * _EN_UNITS[(unit or unit2).lower()]
    scan.pos = before  # "in 10m a walk": the text starts here
    return None


def _zh_relative(scan: _Scan, original: str, now: datetime, tz: ZoneInfo) -> _Read:
    """ "十分钟后", "半小时后", "两个半小时后"."""
    m = scan.take(_ZH_REL)
    if not m:
        return _NOT_THIS_FORM
    amount_s, half_before, unit, half_after = m.groups()
    amount = 0.5 if amount_s == "半" else zh_number(amount_s)
    if half_before or half_after:
        amount += 0.5
    seconds = int(amount * _ZH_UNITS[unit])
    if seconds <= 0:
        return None
    return Leading("once", _rest(scan, original), when=_ahead(now, seconds))


def _day_and_clock(scan: _Scan, original: str, now: datetime, tz: ZoneInfo) -> Leading | None:
    """A day, a weekday, and/or a clock: "tomorrow 9am", "明晚8点", "on Friday at 5", "17:30"."""
    local = now.astimezone(tz)
    day, period, bare_weekday, rolls = _day_word(scan, local.date())
    clock = _read_clock(scan, period, bare_ok=day is not None and not bare_weekday)
    if (day is None or bare_weekday) and clock is None:
        return None
    if day is None:
        assert clock is not None
        return Leading("once", _rest(scan, original), when=_next_clock(now, clock, tz))
    if clock is None:
        clock = time(20, 0) if period in ("pm", "晚上") else time(9, 0)
    when = datetime.combine(day, clock, tzinfo=tz)
    if rolls and when <= now:  # "on friday 9:00" said on a Friday at 10: next week's
        when = datetime.combine(day + timedelta(days=7), clock, tzinfo=tz)
    return Leading("once", _rest(scan, original), when=when)


def _day_word(scan: _Scan, today: date) -> tuple[date | None, str | None, bool, bool]:
    """(day, period, bare weekday, rolls) of a leading day word, if any. `rolls`: a weekday
    named without "this"/"这"/"本" (`on friday`, `周五`), which means next week's when today's
    time has passed.

    A bare English weekday is also a common word ("sat down", "sun is out", "wed at 9"): it is
    a time only with a clock after it or a word before it ("on", "next", "this").
    """
    if m := scan.take(_EN_DAYWORD):
        word = m.group(1).lower()
        day = today + timedelta(days=1 if word in ("tomorrow", "tmr") else 0)
        period = {"tonight": "pm", "this evening": "pm", "this afternoon": "pm"}.get(
            " ".join(word.split())
        )
        return day, period, False, False
    if m := scan.take(_ZH_DAYWORD):
        word = m.group(1)
        offset = 2 if word == "后天" else (1 if word[0] == "明" else 0)
        period = {"今晚": "晚上", "明晚": "晚上", "今早": "早上", "明早": "早上"}.get(word)
        return today + timedelta(days=offset), period, False, False
    if m := scan.take(_EN_WEEKDAY):
        which = (m.group(1) or "").lower()
        day = _weekday_date(today, _en_day(m.group(2)), which, False)
        return day, None, m.group(1) is None, which in ("", "on")
    if m := scan.take(_ZH_WEEKDAY):
        day = _weekday_date(today, _ZH_DAY[m.group(2)], m.group(1), True)
        return day, None, False, m.group(1) is None
    return None, None, False, False


def _ahead(now: datetime, seconds: int) -> datetime:
    # Callers refuse anything beyond 5 years; this only keeps timedelta from overflowing.
    return now + timedelta(seconds=min(seconds, 10 * 366 * 86400))


def future_example(now: datetime, tz: ZoneInfo) -> str:
    """An example date for refusals: tomorrow at 09:00, so it is always in the future."""
    return f"{(now.astimezone(tz).date() + timedelta(days=1)).isoformat()} 09:00"
