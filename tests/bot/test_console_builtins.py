"""The real `python bot.py` through the console channel: no model, slash commands only.

Two processes tests: an end-to-end group conversation (two users, one may not delete the other's
reminder, a member joins), and restarts with SIGKILL: a reminder set before the kill fires
exactly once after the restart, one that fell due while the bot was down arrives late with a
note, and neither comes back on a later restart.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, select, update

from function_calls.builtins.reminders.service import reminders_table
from tests.bot.console_proc import ConsoleProc, write_config
from tests.kit import until

SET = r"@(\w+) ⏰ Reminder set for .*\(id ([0-9a-f]{8})\)"


def reminder_states(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [status for (status,) in conn.execute("SELECT status FROM reminders")]


def settled(db: Path) -> bool:
    """The reminder is done (a fire claims the active row first; jobs and sweeps are made from
    active rows only, so nothing is left that could fire it again) and every message sent is
    marked so (an unmarked one would be sent again by the next start)."""
    with sqlite3.connect(db) as conn:
        owed = conn.execute("SELECT count(*) FROM outbox WHERE state = 'pending'").fetchone()[0]
    return reminder_states(db) == ["done"] and owed == 0


def move_back(db: Path, seconds: float) -> None:
    """Every reminder falls due `seconds` earlier: time passing while the bot is down, without
    waiting for it."""
    engine = create_engine(f"sqlite:///{db}")
    delta = timedelta(seconds=seconds)
    try:
        with engine.begin() as conn:
            for row in conn.execute(select(reminders_table)).all():
                at = (datetime.fromisoformat(row.at) - delta).isoformat()
                conn.execute(
                    update(reminders_table)
                    .where(reminders_table.c.id == row.id)
                    .values(at=at, next_run=row.next_run - delta)
                )
    finally:
        engine.dispose()


def delivered(db: Path, text: str) -> int:
    """How many times the bot's history holds `text` (every sent message is stored), alone or
    with a note under it (a reminder that fell due while a slow start-up was still under way
    carries "(Late: ...)" on a second line)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT text FROM messages WHERE role='assistant'").fetchall()
    return sum(1 for (said,) in rows if said == text or said.startswith(text + "\n"))


async def test_group_conversation_set_list_delete(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, welcome={"messages": {"group:team1": "Hi {name}, read the pinned rules!"}}
    )
    bot = await ConsoleProc.start(config)
    try:
        await bot.send(":group team1")
        await bot.send(":as alice")
        await bot.send('/reminder_set at="tomorrow 9:00" text="water the plants"')
        m = await bot.expect(SET)
        assert m.group(1) == "alice"
        alice_id = m.group(2)
        await bot.send(":as bob")
        await bot.send("/reminder_set in 2h review the PR")
        bob_id = (await bot.expect(SET)).group(2)
        await bot.send("/reminder_list")
        await bot.expect(r"Active reminders for this group \(2\):")
        # Soonest first: "in 2h" comes before "tomorrow 9:00" at any time of day.
        await bot.expect(rf"• {bob_id} — .* — review the PR \(by bob\)")
        await bot.expect(rf"• {alice_id} — .* — water the plants \(by alice\)")
        # bob may not delete alice's reminder ...
        await bot.send(f"/reminder_delete {alice_id}")
        await bot.expect(rf"Only alice \(who set it\) or an admin can delete reminder {alice_id}")
        # ... alice may, with a prefix of the id.
        await bot.send(":as alice")
        await bot.send(f"/reminder_delete {alice_id[:5]}")
        await bot.expect(rf"Deleted reminder {alice_id}: water the plants")
        await bot.send("/reminder_list")
        await bot.expect(r"Active reminders for this group \(1\):")
        await bot.expect(rf"• {bob_id} — .* — review the PR \(by bob\)")
        await bot.send(":join dave")
        await bot.expect(r"\[group:team1\] @dave Hi dave, read the pinned rules!")
    finally:
        code = await bot.close()
    assert code == 0
    assert not any(alice_id in line for line in bot.lines[-2:])


async def test_sigkill_restart_fires_exactly_once(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    db = tmp_path / "bot.db"
    first = await ConsoleProc.start(config)
    await first.send(":group team1")
    await first.send(":as bob")
    await first.send("/reminder_set in 4s stand-up")
    await first.expect(SET)
    first.kill()
    await first.proc.wait()
    second = await ConsoleProc.start(config)
    try:
        await second.expect(r"\[group:team1\] @bob ⏰ Reminder: stand-up$", timeout=30)
        await until(lambda: settled(db), 10, lambda: f"reminders: {reminder_states(db)}")
    finally:
        second.kill()
        await second.proc.wait()
    assert sum("Reminder: stand-up" in line for line in second.lines) == 1
    assert delivered(db, "⏰ Reminder: stand-up") == 1
    third = await ConsoleProc.start(config)
    await third.close()  # a whole start and stop with nothing active: nothing to deliver
    assert not any("Reminder" in line for line in third.lines), third.lines
    assert delivered(db, "⏰ Reminder: stand-up") == 1


async def test_due_while_killed_arrives_late_with_a_note(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    first = await ConsoleProc.start(config)
    await first.send(":as carol")
    await first.send("/reminder_set in 1s tea")
    await first.expect(r"⏰ Reminder set for ")
    first.kill()
    await first.proc.wait()
    move_back(tmp_path / "bot.db", 60)  # due while the bot was down
    second = await ConsoleProc.start(config)
    try:
        await second.expect(r"^chatfn> ⏰ Reminder: tea$", timeout=30)
        await second.expect(r"^\(Late: it was due .*; I was offline then\.\)$")
    finally:
        await second.close()
