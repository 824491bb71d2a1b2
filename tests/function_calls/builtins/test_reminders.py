"""Reminders in one process: the real AsyncIOScheduler, the real SQLite file, short real delays.
A "restart" here is closing one Bot and starting another on the same database."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from function_calls.builtins.reminders import ReminderService
from function_calls.builtins.reminders import service as reminder_mod
from function_calls.builtins.reminders.service import ReminderRow, reminders_table, utcnow
from providers.scripted import ScriptedModel, call, say
from tests.function_calls.builtins.conftest import MakeBot
from tests.kit import until

GROUP = "team1"


def reminder_id(reply: str) -> str:
    m = re.search(r"\(id ([0-9a-f]{8})\)", reply)
    assert m, reply
    return m.group(1)


def rows(tb) -> list[ReminderRow]:
    with tb.bot.storage.engine.connect() as conn:
        return [ReminderRow(**r._mapping) for r in conn.execute(select(reminders_table))]


async def fired(tb, chat_id: str, timeout: float) -> ReminderRow:
    """The one reminder row once its fire has settled the row: the fire's audit row ("ok" or
    "refused") is written after the row's last status. The status alone does not tell: a fire
    claims the occurrence (status "done") before it re-checks the permission and writes
    "refused"."""
    await until(
        lambda: [c for c in tb.bot.storage.tool_calls(chat_id) if c.source == "scheduler"],
        timeout,
        "the reminder did not fire",
    )
    [row] = rows(tb)
    return row


def move_back(tb, seconds: float) -> None:
    """Every reminder falls due `seconds` earlier (its `at` and `next_run`): time passing while
    the bot is down, without waiting for it."""
    delta = timedelta(seconds=seconds)
    with tb.bot.storage.engine.begin() as conn:  # the engine reconnects after close
        for row in conn.execute(select(reminders_table)).all():
            at = (datetime.fromisoformat(row.at) - delta).isoformat()
            conn.execute(
                update(reminders_table)
                .where(reminders_table.c.id == row.id)
                .values(at=at, next_run=row.next_run - delta)
            )


async def nothing_will_fire(tb) -> None:
    """No reminder is left to deliver: none active, and the scheduler holds no job (a second
    delivery would need one of the two: a fire claims the active row first)."""
    assert [r.status for r in rows(tb) if r.status == "active"] == []
    service = tb.bot.service(ReminderService)
    assert service._scheduler is None or service._scheduler.get_jobs() == []


async def test_fires_in_the_group_mentioning_its_creator(make_bot: MakeBot) -> None:
    tb, outbox = await make_bot()
    [reply] = await tb.send("/reminder_set in 1s stretch", sender="bob", group=GROUP)
    assert reply.startswith("⏰ Reminder set for ") and "stretch" in reply
    [out] = await outbox.wait(1, timeout=4)
    assert (out.chat_id, out.at, out.text) == (GROUP, "bob", "⏰ Reminder: stretch")
    row = await fired(tb, GROUP, timeout=4)  # settled: nothing left that could send it again
    await nothing_will_fire(tb)
    assert len(outbox.messages) == 1
    assert (row.status, row.fired_count) == ("done", 1)
    audit = [c for c in tb.bot.storage.tool_calls(GROUP) if c.source == "scheduler"]
    assert [(c.function, c.outcome) for c in audit] == [("reminder_set", "ok")]


async def test_private_reminder_has_no_mention(make_bot: MakeBot) -> None:
    tb, outbox = await make_bot()
    await tb.send('/reminder_set at="in 1s" text="tea"', sender="carol")
    [out] = await outbox.wait(1, timeout=4)
    assert (out.chat_id, out.at, out.is_group) == ("private:carol", None, False)


async def test_model_confirmation_comes_from_the_function(make_bot: MakeBot) -> None:
    """The model calls reminder_set; the user sees the function's own confirmation and the
    model is not asked again to paraphrase it."""
    model = ScriptedModel([call("reminder_set", text="call the bank", at="in 2h")])
    tb, _ = await make_bot(model=model)
    replies = await tb.send("remind me in 2 hours to call the bank", sender="bob")
    assert len(replies) == 1 and replies[0].startswith("⏰ Reminder set for ")
    assert len(model.requests) == 1
    tools = {t.name for t in model.requests[0].tools}
    assert {"reminder_set", "reminder_list", "reminder_delete"} <= tools
    assert [r.text for r in rows(tb)] == ["call the bank"]


async def test_model_gets_refusal_it_can_act_on(make_bot: MakeBot) -> None:
    model = ScriptedModel(
        [
            call("reminder_set", text="x", at="2020-01-01 09:00"),
            call("reminder_set", text="x", at="in 1h"),
            say("unused"),
        ]
    )
    tb, _ = await make_bot(model=model)
    replies = await tb.send("remind me of x", sender="bob")
    tool_result = model.requests[1].messages[-1]
    assert tool_result.role == "tool" and "is in the past" in tool_result.content
    assert "give a future time" in tool_result.content
    assert len(replies) == 1 and replies[0].startswith("⏰ Reminder set")
    assert len(rows(tb)) == 1


async def test_slash_refusals(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    cases = {
        '/reminder_set at="2020-01-01 09:00" text=x': "is in the past",
        '/reminder_set at="2025-02-30 09:00" text=x': "is not a real date",
        '/reminder_set kind=cron cron="0 25 * * *" text=x': "bad cron expression",
        "/reminder_set kind=weekly at=09:00 weekday=funday text=x": "is not a weekday",
        "/reminder_set just some text": "say when",
        # a bare weekday word before plain text is text, not Saturday 09:00 "down"
        "/reminder_set sat down": "say when",
    }
    for command, expected in cases.items():
        [reply] = await tb.send(command, sender="bob")
        assert reply.startswith("Reminder not set: ") and expected in reply, (command, reply)
    assert rows(tb) == []
    [reply] = await tb.send("/reminder_set on sat down", sender="bob")
    assert reply.startswith("⏰ Reminder set for Sat ") and " 09:00 " in reply, reply
    assert reply.split(": ", 1)[1].startswith("down (id "), reply


async def test_recurring_kinds_and_free_text(make_bot: MakeBot) -> None:
    tb, _ = await make_bot(config={"reminders": {"timezone": "Europe/Berlin"}})
    [daily] = await tb.send("/reminder_set daily 08:30 pills", sender="bob")
    [weekly] = await tb.send("/reminder_set every mon 9:00 report", sender="bob")
    [cron] = await tb.send(
        '/reminder_set kind=cron cron="0 9 * * 1-5" text="stand-up"', sender="bob"
    )
    assert "daily 08:30 (next " in daily and ": pills" in daily
    assert "weekly on mon 09:00 (next Mon " in weekly
    assert "cron 0 9 * * 1-5 (next " in cron and "CE" in cron  # CET or CEST
    assert {r.kind for r in rows(tb)} == {"daily", "weekly", "cron"}


async def test_list_and_delete_by_unique_prefix(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    ids = []
    for i in range(3):
        [reply] = await tb.send(f"/reminder_set in {i + 1}h thing {i}", sender="bob", group=GROUP)
        ids.append(reminder_id(reply))
    [listing] = await tb.send("/reminder_list", sender="alice", group=GROUP)
    for i, rid in enumerate(ids):
        assert f"• {rid} — " in listing and f"thing {i} (by bob)" in listing
    target = ids[1]
    others = [r for r in ids if r != target]
    prefix = next(
        target[:n] for n in range(1, 9) if not any(o.startswith(target[:n]) for o in others)
    )
    [deleted] = await tb.send(f"/reminder_delete {prefix}", sender="bob", group=GROUP)
    assert deleted == f"Deleted reminder {target}: thing 1"
    [listing] = await tb.send("/reminder_list", sender="bob", group=GROUP)
    assert target not in listing and all(o in listing for o in others)
    [missing] = await tb.send("/reminder_delete id=zzz", sender="bob", group=GROUP)
    assert "No active reminder with id 'zzz'" in missing


async def test_ambiguous_prefix_asks_for_more(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    service = tb.bot.service(ReminderService)
    for i in range(17):  # 17 ids over 16 hex digits: two share a first character
        await tb.send(f"/reminder_set in {i + 1}h t{i}", sender="bob", group=GROUP)
    by_first: dict[str, int] = {}
    for row in await service.visible_to("test", GROUP, True, "bob"):
        by_first[row.id[0]] = by_first.get(row.id[0], 0) + 1
    shared = next(c for c, n in by_first.items() if n > 1)
    [reply] = await tb.send(f"/reminder_delete {shared}", sender="bob", group=GROUP)
    assert f"Id '{shared}' matches" in reply and "give more characters" in reply


async def test_only_creator_or_admin_deletes(make_bot: MakeBot) -> None:
    tb, _ = await make_bot(config={"bot": {"admins": ["root"]}})
    rid = reminder_id((await tb.send("/reminder_set in 1h mine", sender="bob", group=GROUP))[0])
    [refused] = await tb.send(f"/reminder_delete {rid}", sender="mallory", group=GROUP)
    assert refused == f"Only bob (who set it) or an admin can delete reminder {rid}."
    assert rows(tb)[0].status == "active"
    [ok] = await tb.send(f"/reminder_delete {rid}", sender="root", group=GROUP)
    assert ok.startswith("Deleted reminder")
    assert rows(tb)[0].status == "deleted"


async def test_per_user_cap(make_bot: MakeBot) -> None:
    tb, _ = await make_bot(config={"reminders": {"max_per_user": 2}})
    for i in range(2):
        assert "set for" in (await tb.send(f"/reminder_set in {i + 1}h r{i}", sender="bob"))[0]
    [refused] = await tb.send("/reminder_set in 3h r2", sender="bob")
    assert "already have 2 active reminders" in refused and "/reminder_delete" in refused
    assert "set for" in (await tb.send("/reminder_set in 3h other", sender="alice"))[0]


async def test_due_while_down_is_delivered_late_once(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    await tb.send("/reminder_set in 1s water", sender="bob", group=GROUP)
    await tb.aclose()
    move_back(tb, 60)  # due while no bot runs
    tb2, outbox = await make_bot()
    [out] = await outbox.wait(1, timeout=4)
    assert out.text.startswith("⏰ Reminder: water\n(Late: it was due ")
    assert "I was offline then" in out.text and out.at == "bob"
    await fired(tb2, GROUP, timeout=4)
    await tb2.aclose()
    tb3, outbox3 = await make_bot()  # and once more: nothing is delivered twice
    await nothing_will_fire(tb3)
    assert outbox3.messages == []


async def test_past_grace_is_reported_not_dropped(make_bot: MakeBot) -> None:
    cfg = {"reminders": {"grace_period": 0.5}}
    tb, _ = await make_bot(config=cfg)
    await tb.send("/reminder_set in 1s water", sender="bob", group=GROUP)
    await tb.aclose()
    move_back(tb, 60)  # due a minute ago, past the grace period
    tb2, outbox = await make_bot(config=cfg)
    [out] = await outbox.wait(1, timeout=4)
    assert out.text.startswith("⏰ Missed reminder: “water” was due ") and "offline" in out.text
    assert rows(tb2)[0].status == "missed"


async def test_recurring_due_while_down_fires_once_and_moves_on(make_bot: MakeBot) -> None:
    """Simulate a daily reminder whose occurrence passed during downtime (row and job moved
    back in time) and check one late delivery, then the next occurrence tomorrow."""
    tb, _ = await make_bot()
    [reply] = await tb.send("/reminder_set daily 09:00 pills", sender="bob", group=GROUP)
    rid = reminder_id(reply)
    service = tb.bot.service(ReminderService)
    row = (await service.visible_to("test", GROUP, True, "bob"))[0]
    await tb.aclose()
    due = utcnow().replace(tzinfo=None) - timedelta(seconds=5)
    with tb.bot.storage.engine.begin() as conn:  # the engine reconnects after close
        conn.execute(
            update(reminders_table).where(reminders_table.c.id == row.id).values(next_run=due)
        )
    tb2, outbox = await make_bot()
    [out] = await outbox.wait(1, timeout=4)
    assert out.text.startswith("⏰ Reminder: pills\n(Late:") and "Next: " in out.text
    [after] = rows(tb2)
    assert after.status == "active" and after.next_run > utcnow().replace(tzinfo=None)
    scheduler = await tb2.bot.service(ReminderService).scheduler()
    assert scheduler.get_job(after.id) is not None, rid


async def test_fire_time_permission_recheck(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    await tb.send("/reminder_set in 1s secret", sender="bob", group=GROUP)
    await tb.aclose()
    # Before it fires, an admin switches reminder_set off in that group.
    cfg = {"function_calls": {"chats": {GROUP: {"disabled": ["reminder_set"]}}}}
    tb2, outbox = await make_bot(config=cfg)
    # Due 1 s after it was set; how long the fire takes after that is the machine's business
    # (CI once cancelled it mid-claim after a fixed 1.5 s wait, and once read the row between
    # the claim and the refusal).
    row = await fired(tb2, GROUP, timeout=15)
    assert outbox.messages == []
    assert row.status == "refused" and "disabled in this chat" in row.note
    audit = [c for c in tb2.bot.storage.tool_calls(GROUP) if c.source == "scheduler"]
    assert [c.outcome for c in audit] == ["refused"]


async def test_switched_off_in_config(make_bot: MakeBot) -> None:
    tb, _ = await make_bot(config={"reminders": {"enabled": False}})
    assert "reminder_set" not in tb.bot.registry and tb.bot.service(ReminderService) is None
    [reply] = await tb.send("/reminder_set in 1h x", sender="bob")
    assert reply.startswith("Unknown command /reminder_set")


async def test_private_list_shows_own_reminders_from_groups(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    rid = reminder_id((await tb.send("/reminder_set in 1h demo", sender="bob", group=GROUP))[0])
    await tb.send("/reminder_set in 1h other", sender="alice", group=GROUP)
    [listing] = await tb.send("/reminder_list", sender="bob")
    assert listing.startswith("Active reminders for you (1):")
    assert f"• {rid} — " in listing and "demo (in team1)" in listing
    [ok] = await tb.send(f"/reminder_delete {rid[:4]}", sender="bob")
    assert ok == f"Deleted reminder {rid}: demo"


async def test_huge_relative_time_via_command_gets_a_usable_refusal(make_bot: MakeBot) -> None:
    tb, _ = await make_bot()
    [reply] = await tb.send("/reminder_set in 99999999999w stretch", sender="bob")
    assert "Reminder not set" in reply and "5 years" in reply


async def test_daily_reminder_fires_once_on_the_fall_back_night(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """01:30 happens twice in New York on 2025-11-02 (EDT, then EST): a daily 01:30 reminder
    must be delivered once that night, not at both."""
    tb, outbox = await make_bot(config={"reminders": {"timezone": "America/New_York"}})
    [reply] = await tb.send("/reminder_set daily 01:30 water the plants", sender="bob")
    assert "Reminder set" in reply, reply
    service = tb.bot.service(ReminderService)
    [row] = await service.visible_to("test", "private:bob", False, "bob")
    first = datetime(2025, 11, 2, 5, 30)  # 01:30 EDT, naive UTC as stored
    with tb.bot.storage.engine.begin() as conn:
        conn.execute(
            update(reminders_table).where(reminders_table.c.id == row.id).values(next_run=first)
        )

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
    stored = await tb.bot.storage.run(service.get, row.id)
    assert stored.next_run == datetime(2025, 11, 3, 6, 30)  # 01:30 EST next day


async def test_delivered_reminders_are_not_kept_forever(
    make_bot: MakeBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ReminderService.fired` grew by one message per delivery for the life of the process
    (a cron reminder every minute: 1440 a day), and nothing read it."""
    tb, outbox = await make_bot()
    [reply] = await tb.send('/reminder_set kind=cron cron="* * * * *" text=tick', sender="bob")
    assert "Reminder set" in reply, reply
    service = tb.bot.service(ReminderService)
    [row] = await service.visible_to("test", "private:bob", False, "bob")
    due = datetime(2025, 6, 1, 0, 0)
    with tb.bot.storage.engine.begin() as conn:
        conn.execute(
            update(reminders_table).where(reminders_table.c.id == row.id).values(next_run=due)
        )
    for minute in range(110):
        now = datetime(2025, 6, 1, 0, 0, 0, 100000, tzinfo=UTC) + timedelta(minutes=minute)
        monkeypatch.setattr(reminder_mod, "utcnow", lambda now=now: now)
        assert await service.fire(row.id) is not None
    assert len(outbox.messages) == 110
    assert len(service.fired) <= 100


async def test_scheduler_is_made_only_once_a_reminder_exists(make_bot: MakeBot) -> None:
    """A bot without reminders runs no scheduler (nor imports it: ~1.3 MB); the first reminder
    starts it, and a restart with an active reminder starts it at once."""
    tb, outbox = await make_bot()
    service = tb.bot.service(ReminderService)
    assert service._scheduler is None
    [reply] = await tb.send("/reminder_set in 1s stretch", sender="bob")
    assert "Reminder set" in reply, reply
    assert service._scheduler is not None and service._scheduler.running
    [out] = await outbox.wait(1, timeout=4)
    assert out.text == "⏰ Reminder: stretch"
    await tb.send("/reminder_set daily 09:00 pills", sender="bob")
    await tb.aclose()
    tb2, _ = await make_bot()
    again = tb2.bot.service(ReminderService)
    assert again._scheduler is not None and again._scheduler.running
    assert len(again._scheduler.get_jobs()) == 1


async def test_reminder_set_before_the_start_runs_once_the_bot_starts(make_bot: MakeBot) -> None:
    tb, outbox = await make_bot(start=False)
    [reply] = await tb.send("/reminder_set in 1s stretch", sender="bob")
    assert "Reminder set" in reply, reply
    service = tb.bot.service(ReminderService)
    assert service._scheduler is not None and not service._scheduler.running
    await tb.start()
    assert service._scheduler.running
    [out] = await outbox.wait(1, timeout=4)
    assert out.text == "⏰ Reminder: stretch"
