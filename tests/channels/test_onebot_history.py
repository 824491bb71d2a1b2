"""A OneBot message that may have been sent already is looked for in the chat's history before
it is sent again (channels/onebot_history.py): a reply sent just before a SIGKILL, whose
delivery mark never got written, and a send whose socket dropped before its answer. Real
SQLite, the real channel, the OneBot peer simulator answering get_group_msg_history as NapCat
does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from loguru import logger
from sqlalchemy import update

from channels.onebot import OneBotChannel
from channels.onebot_history import Owed, match_sent, own_texts
from common.messages import OutgoingMessage
from runtime.bot import Bot
from storage.models import outbox_table
from tests.channels.conftest import TOKEN
from tests.channels.onebot_sim import OneBotSim, at, plain, text
from tests.channels.test_outbox_delivery import make_bot, states, until_states

SELF = 10001000


async def _kill_after_sending(tmp_path: Path, sim_holder: list[OneBotSim]) -> None:
    """A first bot sends "sent before the kill" to group 42, then dies before marking it:
    the row is put back to pending, as a SIGKILL between the send and the mark leaves it.
    "never sent" waits for group 43 (its account went away first)."""
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
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


async def _restart(tmp_path: Path, sim: OneBotSim) -> tuple[Bot, OneBotChannel]:
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim.url = f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws"
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
        await asyncio.sleep(0.2)
    finally:
        await sim.close()
        await channel.stop()
        await bot.aclose()
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
        await sim.close()
        await channel.stop()
        await bot.aclose()
    sends = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert sends == ["sent before the kill", "sent before the kill", "never sent"]
    assert len(sim.sent("get_group_msg_history")) == 1  # not asked again for group 43
    assert sum("get_group_msg_history failed" in line for line in logs) == 1


async def test_a_send_whose_socket_dropped_before_the_answer_is_not_repeated(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path, onebot={"reconnect_wait": 3.0})
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
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
        await asyncio.sleep(0.2)
    finally:
        await sim.close()
        await channel.stop()
        await bot.aclose()
    assert [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")] == [
        "only once please"
    ]
    assert len(sim.sent("get_group_msg_history")) == 1


async def test_a_dropped_send_that_did_not_happen_is_sent_once_the_account_is_back(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path, onebot={"reconnect_wait": 3.0})
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
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
        await sim.close()
        await channel.stop()
        await bot.aclose()
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
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
    await sim.connect()
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo one")])
    await sim.wait_action("send_group_msg")
    await sim.close()
    await channel.stop()
    await bot.aclose()
    # Said while the bot is down: the implementation keeps no event for it.
    await sim.group_message(42, ALICE, [at(SELF), text(" /echo two")], deliver=False)
    missed = sim.history[("group", 42)][-1]
    await asyncio.sleep(1.1)  # not in the second of the restart (that would count as live)

    bot, channel = await _restart(tmp_path, sim)
    try:
        await sim.wait_actions(2, "send_group_msg")
        await sim.post(missed)  # the same message arriving live as well: handled once
        await sim.group_message(42, ALICE, [at(SELF), text(" /echo three")])
        await sim.wait_actions(3, "send_group_msg")
        await asyncio.sleep(0.3)
        stored = [m.text for m in bot.storage.recent_messages("onebot", "group:42", 20)]
    finally:
        await sim.close()
        await channel.stop()
        await bot.aclose()
    replies = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert [r.split()[-1] for r in replies] == ["one", "two", "three"]
    assert [t for t in stored if t.startswith("/echo")] == ["/echo one", "/echo two", "/echo three"]
    # One history call for the one chat active lately, at the reconnect.
    assert [a["params"]["group_id"] for a in sim.sent("get_group_msg_history")] == [42]


async def test_no_history_action_means_no_catch_up_and_one_warning(tmp_path: Path) -> None:
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", SELF, token=TOKEN)
    sim.history_supported = False
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="WARNING")
    try:
        await sim.connect()
        for group in (42, 43):
            await sim.group_message(group, ALICE, [at(SELF), text(" /echo hi")])
        await sim.wait_actions(2, "send_group_msg")
        # A chat whose newest message came in this very second counts as live, not missed.
        await asyncio.sleep(1.1)
        await sim.restart()
        await asyncio.sleep(0.5)
    finally:
        logger.remove(sink)
        await sim.close()
        await channel.stop()
        await bot.aclose()
    assert len(sim.sent("get_group_msg_history")) == 1
    assert sum("not caught up" in line for line in logs) == 1
