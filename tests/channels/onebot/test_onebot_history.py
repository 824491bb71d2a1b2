"""A OneBot message that may have been sent already is looked for in the chat's history before
it is sent again (chatfn/channels/onebot/history.py): a reply sent just before a SIGKILL, whose
delivery mark never got written, and a send whose socket dropped before its answer. Real
SQLite, the real channel, the OneBot peer simulator answering get_group_msg_history as NapCat
does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from loguru import logger
from sqlalchemy import update

from chatfn.channels.onebot import catchup
from chatfn.channels.onebot.channel import OneBotChannel
from chatfn.channels.onebot.history import Owed, match_sent, own_texts
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.storage.models import outbox_table
from tests.channels.conftest import TOKEN
from tests.channels.onebot.onebot_sim import OneBotSim, at, plain, text
from tests.channels.test_outbox_delivery import make_bot, states, until_states
from tests.kit import until

SELF = 10001000


class _Clock(datetime):
    """The catch-up's clock (catchup.datetime in these tests): the real one, plus the time a
    test said passed (`_time_passes`), where it slept before. A message the peer timed (whole
    seconds) before that is not in the second of the next connect, which would count it as
    arrived live."""

    ahead = 0.0

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return datetime.now(tz) + timedelta(seconds=cls.ahead)


def _time_passes(seconds: float) -> None:
    _Clock.ahead += seconds


@pytest.fixture(autouse=True)
def _catch_up_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Clock, "ahead", 0.0)
    monkeypatch.setattr(catchup, "datetime", _Clock)


def _catch_ups(channel: OneBotChannel) -> list[int]:
    """What each catch-up run of `channel` (one a connect) came to, once it has ended: what a
    test waits for before it counts the history calls and replies a catch-up could cause."""
    done: list[int] = []
    run = channel.catch_up.run

    async def counted(conn: Any) -> int:
        found = await run(conn)
        done.append(found)
        return found

    channel.catch_up.run = counted  # type: ignore[method-assign]
    return done


async def _kill_after_sending(tmp_path: Path, sim_holder: list[OneBotSim]) -> None:
    """A first bot sends "sent before the kill" to group 42, then dies before marking it:
    the row is put back to pending, as a SIGKILL between the send and the mark leaves it.
    "never sent" waits for group 43 (its account went away first)."""
    bot, channel, sim = await _start(tmp_path)
    sim_holder.append(sim)
    await sim.connect()
    await bot.send(OutgoingMessage("onebot", "group:42", "sent before the kill", True))
    await until_states(bot, [(1, "delivered")])
    await sim.close()
    await bot.send(OutgoingMessage("onebot", "group:43", "never sent", True))
    await until_states(bot, [(1, "delivered"), (2, "pending")])
    with bot.storage.engine.begin() as conn:
        conn.execute(update(outbox_table).where(outbox_table.c.id == 1).values(state="pending"))
    await channel.stop()
    await bot.aclose()


async def _start(tmp_path: Path, **cfg: Any) -> tuple[Bot, OneBotChannel, OneBotSim]:
    """A started bot with its OneBot channel, and a peer for it (not connected yet: a test
    sets the peer's behaviour first)."""
    bot = make_bot(tmp_path, **cfg)
    channel = OneBotChannel(bot.channel_host)
    channel.catch_ups = _catch_ups(channel)  # type: ignore[attr-defined]
    await bot.start()
    await channel.start()
    url = f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws"
    return bot, channel, OneBotSim(url, SELF, token=TOKEN)


async def _stop(bot: Bot, channel: OneBotChannel, sim: OneBotSim) -> None:
    await sim.close()
    await channel.stop()
    await bot.aclose()


async def _restart(tmp_path: Path, sim: OneBotSim) -> tuple[Bot, OneBotChannel]:
    """A new bot on the same database; the same peer connects to it."""
    bot, channel, fresh = await _start(tmp_path)
    sim.url = fresh.url
    await sim.connect()
    return bot, channel


async def test_a_reply_sent_before_a_kill_but_not_marked_is_not_sent_again(
    tmp_path: Path,
) -> None:
    holder: list[OneBotSim] = []
    await _kill_after_sending(tmp_path, holder)
    sim = holder[0]
    bot, channel = await _restart(tmp_path, sim)
    try:
        await until_states(bot, [(1, "delivered"), (2, "delivered")])
        await until(lambda: channel.catch_ups)  # the connect's catch-up has ended too
    finally:
        await _stop(bot, channel, sim)
    sends = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert sends == ["sent before the kill", "never sent"]  # each once, across the kill
    history = sim.sent("get_group_msg_history")
    # One history call per chat with such rows, and only for rows owed from before the start.
    assert sorted(a["params"]["group_id"] for a in history) == [42, 43]


async def test_without_the_history_action_the_message_is_sent_again_and_logged_once(
    tmp_path: Path,
) -> None:
    holder: list[OneBotSim] = []
    await _kill_after_sending(tmp_path, holder)
    sim = holder[0]
    sim.history_supported = False  # Lagrange / LLOneBot builds without it: 1404
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="WARNING")
    bot, channel = await _restart(tmp_path, sim)
    try:
        await until_states(bot, [(1, "delivered"), (2, "delivered")])
    finally:
        logger.remove(sink)
        await _stop(bot, channel, sim)
    sends = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert sends == ["sent before the kill", "sent before the kill", "never sent"]
    assert len(sim.sent("get_group_msg_history")) == 1  # not asked again for group 43
    assert sum("get_group_msg_history failed" in line for line in logs) == 1


async def test_a_send_whose_socket_dropped_before_the_answer_is_not_repeated(
    tmp_path: Path,
) -> None:
    bot, channel, sim = await _start(tmp_path, onebot={"reconnect_wait": 3.0})
    sim.drop_after["send_group_msg"] = 1  # carried out, then the implementation restarts
    try:
        await sim.connect()
        send = asyncio.create_task(
            bot.send(OutgoingMessage("onebot", "group:42", "only once please", True))
        )
        await sim.wait_action("send_group_msg")
        await sim.restart(downtime=0.3)
        await send
        await until_states(bot, [(1, "delivered")])
        await until(lambda: len(channel.catch_ups) == 2)  # both connects' catch-ups ended
    finally:
        await _stop(bot, channel, sim)
    assert [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")] == [
        "only once please"
    ]
    assert len(sim.sent("get_group_msg_history")) == 1


async def test_a_dropped_send_that_did_not_happen_is_sent_once_the_account_is_back(
    tmp_path: Path,
) -> None:
    bot, channel, sim = await _start(tmp_path, onebot={"reconnect_wait": 3.0})
    sim.drop_after["send_group_msg"] = 1
    try:
        await sim.connect()
        send = asyncio.create_task(bot.send(OutgoingMessage("onebot", "group:42", "hi", True)))
        await sim.wait_action("send_group_msg")
        sim.history.clear()  # the implementation died before it could send it
        await sim.restart(downtime=0.3)
        await send
        await until_states(bot, [(1, "delivered")])
    finally:
        await _stop(bot, channel, sim)
    assert len(sim.sent("send_group_msg")) == 2  # the lost one, and the one that arrived
    assert len(sim.history[("group", 42)]) == 1
    assert states(bot) == [(1, "delivered")]


# -- matching --------------------------------------------------------------------------------
NOW = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)


def _own(*items: tuple[float, str]) -> list[tuple[float, str]]:
    return [(NOW.timestamp() + dt, text) for dt, text in items]


def test_every_part_must_be_there_in_order_and_after_the_row_was_written() -> None:
    owed = [Owed(1, ["part one", "part two"], NOW)]
    assert match_sent(owed, _own((1, "part one"), (2, "part two"))) == {1}
    assert match_sent(owed, _own((1, "part one"))) == set()  # half sent: sent again
    assert match_sent(owed, _own((1, "part two"), (2, "part one"))) == set()
    # The same words said by the bot long before this row existed do not count.
    assert match_sent(owed, _own((-3600, "part one"), (-3599, "part two"))) == set()


def test_one_own_message_proves_one_owed_message_only() -> None:
    owed = [Owed(1, ["ok"], NOW), Owed(2, ["ok"], NOW + timedelta(seconds=1))]
    assert match_sent(owed, _own((1, "ok"))) == {1}
    assert match_sent(owed, _own((1, "ok"), (2, "ok"))) == {1, 2}


def test_own_texts_reads_napcat_history_entries_and_skips_others() -> None:
    messages = [
        {"user_id": 5, "time": 10, "message": [{"type": "text", "data": {"text": "user"}}]},
        {
            "user_id": SELF,
            "time": 11,
            "post_type": "message_sent",
            "message": [
                {"type": "reply", "data": {"id": "7"}},
                {"type": "at", "data": {"qq": "5"}},
                {"type": "text", "data": {"text": " ack  it"}},
            ],
        },
        {"sender": {"user_id": SELF}, "time": 12, "raw_message": "cq &#91;string&#93;"},
        "not a message",
        {"user_id": SELF, "time": "soon", "message": []},
    ]
    assert own_texts(messages, str(SELF)) == [(11.0, "ack it"), (12.0, "cq [string]")]


# -- catching up what was said while the bot was away ----------------------------------------
ALICE = 5001


async def test_a_message_said_while_the_bot_was_down_is_caught_up_once(tmp_path: Path) -> None:
    bot, channel, sim = await _start(tmp_path)
    await sim.connect()
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo one")])
    await sim.wait_action("send_group_msg")
    await _stop(bot, channel, sim)
    # Said while the bot is down: the implementation keeps no event for it.
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo two")], deliver=False)
    missed = sim.history[("group", 42)][-1]
    _time_passes(1.1)  # not in the second of the restart (that would count as live)

    bot, channel = await _restart(tmp_path, sim)
    try:
        await sim.wait_actions(2, "send_group_msg")
        await sim.post(missed)  # the same message arriving live as well: handled once
        await sim.group_message(42, ALICE, [at(SELF), text(" /echo three")])
        # "three" answered: in the chat's order, a second turn of "two" would have come first.
        await sim.wait_action(
            "send_group_msg", where=lambda a: "three" in plain(a["params"]["message"])
        )
        await until(lambda: channel.catch_ups)
        stored = [m.text for m in bot.storage.recent_messages("onebot", "group:42", 20)]
    finally:
        await _stop(bot, channel, sim)
    replies = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert [r.split()[-1] for r in replies] == ["one", "two", "three"]
    assert [t for t in stored if t.startswith("/echo")] == ["/echo one", "/echo two", "/echo three"]
    # One history call for the one chat active lately, at the reconnect.
    assert [a["params"]["group_id"] for a in sim.sent("get_group_msg_history")] == [42]


async def test_no_history_action_means_no_catch_up_and_one_warning(tmp_path: Path) -> None:
    bot, channel, sim = await _start(tmp_path)
    sim.history_supported = False
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="WARNING")
    try:
        await sim.connect()
        for group in (42, 43):
            await sim.group_message(group, ALICE, [at(SELF), text(" /echo hi")])
        await sim.wait_actions(2, "send_group_msg")
        # A chat whose newest message came in this very second counts as live, not missed.
        _time_passes(1.1)
        await sim.restart()
        await until(lambda: len(channel.catch_ups) == 2)  # the second connect's ended
    finally:
        logger.remove(sink)
        await _stop(bot, channel, sim)
    assert len(sim.sent("get_group_msg_history")) == 1
    assert sum("not caught up" in line for line in logs) == 1


# -- chats the bot stored nothing for: found with get_recent_contact -------------------------
BOB = 6001


async def _down_then_missed(tmp_path: Path, sim_holder: list[OneBotSim]) -> dict[str, object]:
    """A first bot answers in group 42 and stops. While it is down, group 77 (never seen by the
    bot) and a new friend say something: nothing of theirs is stored. An old group 88 whose
    latest message is older than the resume window is in the recent list as well."""
    bot, channel, sim = await _start(tmp_path)
    sim_holder.append(sim)
    await sim.connect()
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo one")])
    await sim.wait_action("send_group_msg")
    # The first connect's catch-up asks for the recent contacts too; under load that request
    # may come after the reply, and a stop before it would leave one call where two are counted.
    await sim.wait_action("get_recent_contact")
    await _stop(bot, channel, sim)
    old = await sim.group_message(88, ALICE, [at(SELF), text(" /echo old")], deliver=False)
    old["time"] -= 3600  # an hour ago: beyond resume_window (600 s)
    sim.history[("group", 88)][-1]["time"] = old["time"]
    lost = await sim.group_message(77, ALICE, [at(SELF), text(" /echo lost")], deliver=False)
    await sim.private_message(BOB, "/echo friend", deliver=False)
    _time_passes(1.1)  # not in the second of the restart (that would count as live)
    return lost


async def test_a_missed_message_in_a_chat_with_nothing_stored_is_caught_up_once(
    tmp_path: Path,
) -> None:
    holder: list[OneBotSim] = []
    lost = await _down_then_missed(tmp_path, holder)
    sim = holder[0]
    bot, channel = await _restart(tmp_path, sim)
    try:
        await sim.wait_action("send_group_msg", where=lambda a: a["params"]["group_id"] == 77)
        await sim.wait_action("send_private_msg")
        await sim.post(lost)  # the same message arriving live as well: handled once
        await sim.group_message(77, ALICE, [at(SELF), text(" /echo live")])
        # "live" answered: in the chat's order, a second turn of "lost" would have come first.
        await sim.wait_action(
            "send_group_msg", where=lambda a: "live" in plain(a["params"]["message"])
        )
        await until(lambda: channel.catch_ups)
        stored = [m.text for m in bot.storage.recent_messages("onebot", "group:77", 20)]
        friend = [m.text for m in bot.storage.recent_messages("onebot", f"private:{BOB}", 20)]
    finally:
        await _stop(bot, channel, sim)
    replies: dict[int, list[str]] = {}
    for a in sim.sent("send_group_msg"):
        replies.setdefault(a["params"]["group_id"], []).append(plain(a["params"]["message"]))
    assert [r.split()[-1] for r in replies[77]] == ["lost", "live"]
    assert 88 not in replies  # older than the window: not caught up
    assert [t for t in stored if t.startswith("/echo")] == ["/echo lost", "/echo live"]
    assert [t for t in friend if t.startswith("/echo")] == ["/echo friend"]
    assert len(sim.sent("send_private_msg")) == 1
    # One recent-contact call per connect, bounded; one history call per chat at the reconnect
    # (group 42: a user message stored lately; 77 and the friend: from the recent list).
    recent = sim.sent("get_recent_contact")
    assert len(recent) == 2 and all(0 < a["params"]["count"] <= 100 for a in recent)
    assert sorted(a["params"]["group_id"] for a in sim.sent("get_group_msg_history")) == [42, 77]
    assert [a["params"]["user_id"] for a in sim.sent("get_friend_msg_history")] == [BOB]


async def test_a_message_arriving_live_while_it_is_caught_up_is_handled_once(
    tmp_path: Path,
) -> None:
    holder: list[OneBotSim] = []
    lost = await _down_then_missed(tmp_path, holder)
    sim = holder[0]
    bot, channel = await _restart(tmp_path, sim)
    try:
        await sim.post(lost)  # live at once, racing the catch-up
        await sim.wait_action(
            "get_group_msg_history", where=lambda a: a["params"]["group_id"] == 77
        )
        await sim.wait_action("send_private_msg")
        await until(lambda: channel.catch_ups)
        # A message after them in the chat, answered: a second turn of "lost" would come first.
        await sim.group_message(77, ALICE, [at(SELF), text(" /echo after")])
        await sim.wait_action(
            "send_group_msg", where=lambda a: "after" in plain(a["params"]["message"])
        )
        stored = [m.text for m in bot.storage.recent_messages("onebot", "group:77", 20)]
    finally:
        await _stop(bot, channel, sim)
    to77 = [a for a in sim.sent("send_group_msg") if a["params"]["group_id"] == 77]
    assert [plain(a["params"]["message"]).split()[-1] for a in to77] == ["lost", "after"]
    assert [t for t in stored if t.startswith("/echo")] == ["/echo lost", "/echo after"]


async def test_without_get_recent_contact_only_stored_chats_are_caught_up_and_it_is_logged_once(
    tmp_path: Path,
) -> None:
    holder: list[OneBotSim] = []
    await _down_then_missed(tmp_path, holder)
    sim = holder[0]
    sim.recent_supported = False  # go-cqhttp, Lagrange, older NapCat: 1404
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo two")], deliver=False)
    _time_passes(1.1)
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="WARNING")
    bot, channel = await _restart(tmp_path, sim)
    try:
        await sim.wait_actions(2, "send_group_msg")  # "one" before the stop, "two" caught up
        _time_passes(1.1)
        await sim.restart()  # a second connect of the same account: not asked again
        await sim.wait_actions(2, "get_group_msg_history")
        await until(lambda: len(channel.catch_ups) == 2)  # the second connect's ended
    finally:
        logger.remove(sink)
        await _stop(bot, channel, sim)
    replies = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert [r.split()[-1] for r in replies] == ["one", "two"]  # 77 is not caught up (as before)
    assert sim.sent("send_private_msg") == []
    # Asked at the first bot's connect (supported then) and once by the restarted bot.
    assert len(sim.sent("get_recent_contact")) == 2
    assert {a["params"]["group_id"] for a in sim.sent("get_group_msg_history")} == {42}
    assert sum("get_recent_contact" in line for line in logs) == 1
