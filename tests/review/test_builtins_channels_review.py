"""Review findings in the built-in functions and the channels, each pinned by a test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from aiohttp import ClientSession
from sqlalchemy import update

from channels.http import HttpChannel
from function_calls.builtins.reminders import ReminderService
from function_calls.builtins.reminders import service as reminder_mod
from function_calls.builtins.reminders.service import ReminderRow
from function_calls.builtins.reminders.times import (
    ReminderTimeError,
    build_schedule,
    parse_once,
    split_leading_time,
)
from function_calls.builtins.summary.settings import SummarySettings
from function_calls.builtins.summary.transcript import SpanError, parse_span
from function_calls.testing import TestBot
from tests.builtins import conftest as builtins_conftest
from tests.builtins.conftest import MakeBot

UTC_ZONE = ZoneInfo("UTC")
NOW = datetime(2025, 6, 1, 0, 0, tzinfo=UTC)  # a Sunday
make_bot = builtins_conftest.make_bot  # the fixture: a started TestBot and its outbox


# -- reminder times ----------------------------------------------------------------------------
def test_huge_relative_time_is_refused_not_a_crash() -> None:
    with pytest.raises(ReminderTimeError, match="5 years"):
        parse_once("in 99999999999w", NOW, UTC_ZONE)


async def test_huge_relative_time_via_command_gets_a_usable_refusal(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    [reply] = await tb.send("/reminder_set in 99999999999w stretch", sender="bob")
    assert "Reminder not set" in reply and "5 years" in reply


def test_huge_summary_window_is_refused_not_a_crash() -> None:
    with pytest.raises(SpanError):
        parse_span("99999999999999d", SummarySettings(), NOW, UTC_ZONE)


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        ("fri-mon", {4, 5, 6, 0}),  # wraps over the weekend
        ("sun-thu", {6, 0, 1, 2, 3}),  # a week that starts on Sunday
    ],
)
def test_weekly_wrapping_weekday_range(days: str, expected: set[int]) -> None:
    s = build_schedule("weekly", "09:00", days, None, NOW, UTC_ZONE)
    fired = set()
    after = NOW
    for _ in range(10):
        after = s.trigger.get_next_fire_time(None, after + timedelta(seconds=1))
        fired.add(after.weekday())
    assert fired == expected


def test_cron_day_of_month_and_weekday_mean_either() -> None:
    """Standard cron: with both day-of-month and weekday restricted, either one matching
    fires (crontab(5)); `0 9 1 * 1` is the 1st of each month and every Monday."""
    s = build_schedule("cron", None, None, "0 9 1 * 1", NOW, UTC_ZONE)
    assert s.first_run == datetime(2025, 6, 1, 9, 0, tzinfo=UTC)  # the 1st, a Sunday
    nxt = s.trigger.get_next_fire_time(None, s.first_run + timedelta(seconds=1))
    assert nxt == datetime(2025, 6, 2, 9, 0, tzinfo=UTC)  # the next Monday


# -- reminders across a DST fall-back ------------------------------------------------------------
async def test_daily_reminder_fires_once_on_the_fall_back_night(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """01:30 happens twice in New York on 2025-11-02 (EDT, then EST): a daily 01:30 reminder
    must be delivered once that night, not at both."""
    tb, outbox = await make_bot(config={"reminders": {"timezone": "America/New_York"}})
    [reply] = await tb.send("/reminder_set daily 01:30 water the plants", sender="bob")
    assert "Reminder set" in reply, reply
    service = tb.bot.service(ReminderService)
    [row] = service.visible_to("test", "private:bob", False, "bob")
    first = datetime(2025, 11, 2, 5, 30)  # 01:30 EDT, naive UTC as stored
    with tb.bot.storage.session() as s:
        s.execute(update(ReminderRow).where(ReminderRow.id == row.id).values(next_run=first))
        s.commit()

    monkeypatch.setattr(
        reminder_mod, "utcnow", lambda: datetime(2025, 11, 2, 5, 30, 0, 500000, tzinfo=UTC)
    )
    assert await service.fire(row.id) is not None
    # The scheduler's own trigger wakes again at 01:30 EST (06:30 UTC).
    monkeypatch.setattr(
        reminder_mod, "utcnow", lambda: datetime(2025, 11, 2, 6, 30, 0, 500000, tzinfo=UTC)
    )
    assert await service.fire(row.id) is None
    assert len(outbox.messages) == 1
    assert service.get(row.id).next_run == datetime(2025, 11, 3, 6, 30)  # 01:30 EST next day


# -- HTTP channel input ----------------------------------------------------------------------------
async def test_http_chat_name_is_bounded_like_the_other_fields(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot, host="127.0.0.1", port=0)
    await channel.start()
    try:
        async with ClientSession() as http:
            resp = await http.post(
                f"http://127.0.0.1:{channel.bound_port}/v1/messages",
                json={
                    "chat_id": "group:x",
                    "sender_id": "a",
                    "text": "hi",
                    "is_group": True,
                    "chat_name": "n" * 5000,
                },
            )
            assert resp.status == 400
            assert (await resp.json())["field"] == "chat_name"
    finally:
        await channel.stop()
        await tb.bot.aclose()


async def test_delivered_reminders_are_not_kept_forever(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ReminderService.fired` grew by one message per delivery for the life of the process
    (a cron reminder every minute: 1440 a day), and nothing read it."""
    tb, outbox = await make_bot()
    [reply] = await tb.send('/reminder_set kind=cron cron="* * * * *" text=tick', sender="bob")
    assert "Reminder set" in reply, reply
    service = tb.bot.service(ReminderService)
    [row] = service.visible_to("test", "private:bob", False, "bob")
    due = datetime(2025, 6, 1, 0, 0)
    with tb.bot.storage.session() as s:
        s.execute(update(ReminderRow).where(ReminderRow.id == row.id).values(next_run=due))
        s.commit()
    for minute in range(110):
        now = datetime(2025, 6, 1, 0, 0, 0, 100000, tzinfo=UTC) + timedelta(minutes=minute)
        monkeypatch.setattr(reminder_mod, "utcnow", lambda now=now: now)
        assert await service.fire(row.id) is not None
    assert len(outbox.messages) == 110
    assert len(service.fired) <= 100


def test_relative_time_patterns_do_not_backtrack_exponentially() -> None:
    """`1hand` could be read as unit `hand` or as `h` + `and`, so each repetition doubled the
    regex work: ~150 characters in `/reminder_set` froze the event loop for minutes."""
    import time

    start = time.perf_counter()
    with pytest.raises(ReminderTimeError):
        parse_once("in " + "1hand " * 24 + "!", NOW, UTC_ZONE)
    split_leading_time("in " + "1hand " * 24 + "5")
    assert time.perf_counter() - start < 1.0
    assert split_leading_time("in 1h and 30m call") == ("in 1h and 30m", "call")
    assert parse_once("in 1h and 30m", NOW, UTC_ZONE) == NOW + timedelta(minutes=90)


def test_cq_parse_of_unclosed_codes_is_linear() -> None:
    """Each unclosed `[CQ:` scanned to the end of the message (quadratic: a 48 KB raw message
    held the event loop ~3 s). `[` inside a CQ code is always escaped (&#91;), so a scan can
    stop at the next `[`."""
    import time

    from channels.onebot_message import parse_cq

    start = time.perf_counter()
    segments = parse_cq("[CQ:a," * 8000)
    assert time.perf_counter() - start < 0.5
    assert "".join(s["data"]["text"] for s in segments) == "[CQ:a," * 8000
    assert parse_cq("hi[CQ:at,qq=1]x") == [
        {"type": "text", "data": {"text": "hi"}},
        {"type": "at", "data": {"qq": "1"}},
        {"type": "text", "data": {"text": "x"}},
    ]
