"""The OneBot v11 channel against a local OneBot v11 implementation (onebot_sim.py here)
over real WebSockets: what a QQ group sees when NapCat or Lagrange is connected to the bot."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from chatfn.channels.onebot.channel import DeliveryError
from chatfn.runtime.bot import Bot
from function_calls.context import OutgoingMessage, SystemEvent
from providers.scripted import ScriptedModel, call, say
from tests.channels.conftest import ESSAY, TOKEN, MakeOneBot
from tests.channels.onebot.onebot_sim import OneBotSim, at, plain, reply, text
from tests.kit import until

SELF = 10001000
GROUP = 123456
ALICE = 12345678


async def connected(url: str, self_id: int = SELF, **kw: object) -> OneBotSim:
    sim = OneBotSim(url, self_id, token=TOKEN, **kw)  # type: ignore[arg-type]
    await sim.connect()
    return sim


async def test_group_message_at_bot_triggers_a_function(make_onebot: MakeOneBot) -> None:
    model = ScriptedModel([call("roll", sides=20)])
    bot, _channel, url = await make_onebot(model=model)
    sim = await connected(url)
    try:
        await sim.group_message(GROUP, ALICE, [at(SELF), text(" roll a d20 please")], card="Alice")
        action = await sim.wait_action("send_group_msg")
    finally:
        await sim.close()
    assert action["params"]["group_id"] == GROUP
    assert action["echo"]
    segments = action["params"]["message"]
    assert segments[0] == {"type": "at", "data": {"qq": str(ALICE)}}
    assert plain(segments) == f"@{ALICE} rolled a d20: 20"
    # The model saw what Alice typed, without the bot's own mention.
    user_turn = [m for m in model.requests[0].messages if m.role == "user"][-1]
    assert "roll a d20 please" in str(user_turn.content)
    assert str(SELF) not in str(user_turn.content)
    history = bot.storage.recent_messages("onebot", f"group:{GROUP}", 10)
    assert [(m.role, m.sender_name) for m in history] == [
        ("user", "Alice"),
        ("assistant", "simbot"),
    ]


async def test_group_message_without_at_is_stored_not_answered(make_onebot: MakeOneBot) -> None:
    model = ScriptedModel([])  # any model call would fail the test
    bot, _channel, url = await make_onebot(model=model)
    sim = await connected(url)
    try:
        # CQ-code string format, with an escaped bracket and a face.
        await sim.group_message(GROUP, ALICE, "just chatting &#91;not a code&#93;[CQ:face,id=14]")
        await sim.group_message(GROUP, ALICE, "[CQ:at,qq=424242] you there?")  # someone else
        await sim.group_message(GROUP, SELF, f"[CQ:at,qq={SELF}] my own echo")  # the bot's own
        # A last message after them, stored once the chat's earlier turns are over: whatever
        # they would have asked of the model or sent came before it.
        await sim.group_message(GROUP, ALICE, "last word")
        await until(lambda: len(bot.storage.recent_messages("onebot", f"group:{GROUP}", 10)) == 3)
    finally:
        await sim.close()
    assert sim.sent("send_group_msg") == []
    assert model.requests == []
    stored = [m.text for m in bot.storage.recent_messages("onebot", f"group:{GROUP}", 10)]
    assert stored == ["just chatting [not a code][face]", "@424242 you there?", "last word"]


async def test_private_message_answered_and_quote_fetched(make_onebot: MakeOneBot) -> None:
    bot, _channel, url = await make_onebot(model=ScriptedModel([say("hello there")]))
    sim = await connected(url)
    try:
        await sim.private_message(ALICE, "hi bot")
        first = await sim.wait_action("send_private_msg")
        # Quote a message the bot has never seen: the channel fetches it with get_msg.
        other = await sim.private_message(777, "the original words", nickname="Bob", deliver=False)
        await sim.private_message(ALICE, [reply(other["message_id"]), text("/quote")])
        second = await sim.wait_action(
            "send_private_msg", where=lambda a: "quoted" in plain(a["params"]["message"])
        )
    finally:
        await sim.close()
    assert first["params"] == {"user_id": ALICE, "message": [text("hello there")]}
    assert plain(second["params"]["message"]) == "quoted: Bob: the original words"
    assert sim.sent("get_msg")[0]["params"] == {"message_id": other["message_id"]}
    assert bot.storage.recent_messages("onebot", f"private:{ALICE}", 10)[0].text == "hi bot"


@pytest.mark.parametrize("policy", ["approve", "ignore"])
async def test_friend_request(make_onebot: MakeOneBot, policy: str) -> None:
    bot, _channel, url = await make_onebot(friend_requests=policy)
    seen: list[SystemEvent] = []

    async def on_request(_bot: Bot, event: SystemEvent) -> None:
        seen.append(event)

    bot.on_event("friend_request", on_request)
    sim = await connected(url)
    try:
        await sim.friend_request(ALICE, comment="let me in", flag="flag-42")
        await until(lambda: seen, 5, "the friend_request event was not handled")
    finally:
        await sim.close()
    approvals = sim.sent("set_friend_add_request")
    if policy == "approve":
        assert [a["params"] for a in approvals] == [{"flag": "flag-42", "approve": True}]
    else:
        assert approvals == []
    assert seen and seen[0].user_id == str(ALICE)
    assert seen[0].data["approved"] is (policy == "approve")


async def test_member_join_gets_a_welcome(make_onebot: MakeOneBot) -> None:
    bot, _channel, url = await make_onebot()

    async def welcome(bot: Bot, event: SystemEvent) -> list[OutgoingMessage]:
        out = OutgoingMessage(
            platform=event.platform,
            chat_id=event.chat_id,
            text="welcome to the group!",
            is_group=True,
            at=event.user_id,
        )
        await bot.send(out)
        return [out]

    bot.on_event("member_joined", welcome)
    sim = await connected(url)
    try:
        await sim.group_increase(GROUP, 5555, operator_id=ALICE)
        action = await sim.wait_action("send_group_msg")
        await sim.group_increase(GROUP, SELF)  # the bot itself joining: no self-welcome
        # Someone joining after it is welcomed next: a self-welcome would have come first.
        await sim.group_increase(GROUP, 5556, operator_id=ALICE)
        await sim.wait_actions(2, "send_group_msg")
    finally:
        await sim.close()
    assert action["params"]["group_id"] == GROUP
    assert plain(action["params"]["message"]) == "@5555 welcome to the group!"
    sends = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert sends == ["@5555 welcome to the group!", "@5556 welcome to the group!"]


async def test_token_checked(make_onebot: MakeOneBot) -> None:
    _bot, channel, url = await make_onebot()
    for token, status in (("wrong", 403), (None, 401)):
        sim = OneBotSim(url, SELF, token=token)
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await sim.connect()
        assert err.value.status == status
    assert channel.self_ids == []
    query = OneBotSim(url, SELF, token=TOKEN, token_in="query")
    await query.connect()
    try:
        await until(
            lambda: channel.self_ids, 5, "the account with its token in the query not connected"
        )
        assert channel.self_ids == [str(SELF)]
    finally:
        await query.close()


async def test_two_accounts_answer_through_their_own_sockets(make_onebot: MakeOneBot) -> None:
    _bot, _channel, url = await make_onebot()
    one, two = await connected(url, 111), await connected(url, 222)
    try:
        await one.group_message(1, ALICE, [at(111), text(" /echo from one")])
        await two.group_message(2, ALICE, "[CQ:at,qq=222] /echo from two")
        a1, a2 = await one.wait_action("send_group_msg"), await two.wait_action("send_group_msg")
    finally:
        await one.close()
        await two.close()
    assert plain(a1["params"]["message"]) == "from one"
    assert plain(a2["params"]["message"]) == "from two"
    assert len(one.sent("send_group_msg")) == len(two.sent("send_group_msg")) == 1


async def test_peer_restart_reconnects_and_nothing_is_lost(make_onebot: MakeOneBot) -> None:
    bot, channel, url = await make_onebot(reconnect_wait=0.3)
    sim = await connected(url)
    try:
        await sim.group_message(GROUP, ALICE, "[CQ:at,qq=10001000] /echo before")
        await sim.wait_action("send_group_msg")
        # A short restart: the send waits for the account to come back.
        await sim.close()
        restart = asyncio.create_task(sim.restart(downtime=0.1))
        await bot.send(OutgoingMessage("onebot", f"group:{GROUP}", "during restart", True))
        await restart
        # A long outage: the message is kept and sent as soon as the account reconnects.
        await sim.close()
        await bot.send(OutgoingMessage("onebot", f"group:{GROUP}", "while down", True))
        assert channel.self_ids == []
        await sim.connect()
        await sim.wait_actions(3, "send_group_msg")
        # And the new socket carries events as before.
        await sim.group_message(GROUP, ALICE, "[CQ:at,qq=10001000] /echo after")
        actions = await sim.wait_actions(4, "send_group_msg")
    finally:
        await sim.close()
    assert [plain(a["params"]["message"]) for a in actions] == [
        "before",
        "during restart",
        "while down",
        "after",
    ]


async def test_failed_action_retried_then_reported(make_onebot: MakeOneBot) -> None:
    bot, _channel, url = await make_onebot(action_timeout=0.3)
    sim = await connected(url)
    try:
        # No message from the group yet: the only connected account sends it.
        sim.fail["send_group_msg"] = [100]  # fails once, then works
        await bot.send(OutgoingMessage("onebot", f"group:{GROUP}", "second try", True))
        sim.fail["send_group_msg"] = [1200, 1200]  # e.g. the bot is muted: refused twice
        with pytest.raises(DeliveryError, match="retcode=1200"):
            await bot.send(OutgoingMessage("onebot", f"group:{GROUP}", "refused", True))
        sim.silent.add("send_group_msg")  # no answer at all: timed out, retried once
        with pytest.raises(DeliveryError):
            await bot.send(OutgoingMessage("onebot", f"group:{GROUP}", "unanswered", True))
    finally:
        await sim.close()
    texts = [plain(a["params"]["message"]) for a in sim.sent("send_group_msg")]
    assert texts == ["second try"] * 2 + ["refused"] * 2 + ["unanswered"] * 2


async def test_long_reply_split_on_lines_with_mention_first(make_onebot: MakeOneBot) -> None:
    lines = ESSAY  # 60 lines of 50 characters
    _bot, _channel, url = await make_onebot(max_message_length=1000)
    sim = await connected(url)
    try:
        await sim.group_message(GROUP, ALICE, [at(SELF), text(" /essay")])
        actions = await sim.wait_actions(3, "send_group_msg")
        await asyncio.sleep(0.1)
    finally:
        await sim.close()
    parts = [a["params"]["message"] for a in sim.sent("send_group_msg")]
    assert all(len(plain(p)) <= 1000 + len(f"@{ALICE} ") for p in parts)
    assert len(parts) == len(actions) == 3  # 20 lines (999 characters) each
    assert parts[0][0]["type"] == "at" and all(p[0]["type"] == "text" for p in parts[1:])
    joined = "\n".join(plain(p).removeprefix(f"@{ALICE} ") for p in parts)
    assert joined == "\n".join(lines)


async def test_fifty_chats_at_once_keep_order_within_each(make_onebot: MakeOneBot) -> None:
    _bot, _channel, url = await make_onebot(send_rate=50, send_burst=2)
    sim = await connected(url)
    per_chat = 5
    try:
        # Round-robin over the chats, as fast as the socket takes them, no waiting for answers.
        for n in range(per_chat):
            for g in range(1, 51):
                await sim.group_message(1000 + g, 2000 + g, f"[CQ:at,qq={SELF}] /echo {g}:{n}")
        await sim.wait_actions(50 * per_chat, "send_group_msg", timeout=20)
    finally:
        await sim.close()
    by_chat: dict[int, list[str]] = {}
    for action in sim.sent("send_group_msg"):
        by_chat.setdefault(action["params"]["group_id"], []).append(
            plain(action["params"]["message"])
        )
    assert len(by_chat) == 50
    for g in range(1, 51):
        assert by_chat[1000 + g] == [f"{g}:{n}" for n in range(per_chat)]
