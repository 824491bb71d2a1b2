"""Approvals through Feishu's card buttons (issue 40 §2), against the local open platform: the
request is an interactive card (JSON 2.0) with Approve / Deny buttons, which the fake checks
as Feishu does; a click is the `card.action.trigger` callback (an event frame on the long
connection, or POSTed encrypted and signed to the request URL) that the channel answers within
3 s with a toast and, once the request is decided, the card shown again without its buttons.
A member's click is refused with a toast, a group manager's (`trust_group_admins`) runs the
call and the model's loop goes on, a click on a card already answered is refused, a denial
does not run the call."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lark_oapi")

from chatfn.channels.feishu import SPEC  # noqa: E402
from chatfn.channels.feishu.render import PRESS, card, press_value  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel, call, say  # noqa: E402
from tests.channels.approval_plugin import risky_plugin  # noqa: E402
from tests.channels.feishu.feishu_driver import FeishuDriver  # noqa: E402
from tests.channels.feishu.feishu_fake import (  # noqa: E402
    BOT_OPEN_ID,
    FakeFeishu,
    Posted,
    card_markdown,
    card_problem,
    read_markdown,
)

PLUGIN = risky_plugin("risky_feishu")
GROUP = "oc_gapprove"
MEMBER, MANAGER, ASKER = "ou_1002", "ou_1003", "ou_1001"


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


async def settled(bot: Bot) -> None:
    """The turns decided requests started have run and what they said is delivered: after
    it, a message or model request that is not there was not caused (a wait for something
    that must not happen, without a fixed sleep)."""
    await bot.approvals.settled()
    await bot.outbox.drain()


def shown(p: Posted) -> str:
    return read_markdown(card_markdown(p))[0]


def buttons(p: Posted) -> list[tuple[str, Any]]:
    elements = (p.content.get("body") or {}).get("elements") or []
    return [
        (e["text"]["content"], e["behaviors"][0]["value"])
        for e in elements
        if e.get("tag") == "button"
    ]


def config(tmp_path: Path, feishu: dict[str, Any], **more: Any) -> dict[str, Any]:
    plugin = tmp_path / "risky_feishu.py"
    plugin.write_text(PLUGIN)
    return {
        "storage": {"url": f"sqlite:///{tmp_path / 'feishu.db'}"},
        "plugins": {"paths": [str(plugin)]},
        "bot": {"name": "feishubot", "admins": ["ou_9999"], "trust_group_admins": True},
        **more,
        "channels": {"feishu": feishu, **more.get("channels", {})},
    }


async def ask(fake: FakeFeishu) -> tuple[Posted, str]:
    """A member asks the bot to move 5 in the group: the request card and its approval ID."""
    fake.chat(GROUP, group=True)["managers"].append(MANAGER)
    mention = {
        "key": "@_user_1",
        "id": {"union_id": "on_bot", "user_id": "", "open_id": BOT_OPEN_ID},
        "name": "chatfnbot",
        "tenant_key": "2ca1d211f64f6438",
    }
    event = fake.message_event(GROUP, ASKER, group=True, text="@_user_1 move 5", mentions=[mention])
    await fake.push(event)
    [request] = await fake.wait_sent(GROUP, 1)
    found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", shown(request))
    assert found, shown(request)
    return request, found.group(1)


def test_the_fake_refuses_cards_feishu_refuses() -> None:
    good = json.loads(
        card("hi", None, [("Approve", press_value("/approve X", "group:oc_1", "hi"))])
    )
    assert card_problem(good) is None
    button = good["body"]["elements"][1]
    assert button["behaviors"] == [
        {"type": "callback", "value": {PRESS: "/approve X", "chat": "group:oc_1", "markdown": "hi"}}
    ]

    def with_button(**fields: Any) -> dict[str, Any]:
        bad = copy.deepcopy(good)
        bad["body"]["elements"][1] = {**button, **fields}
        return bad

    assert card_problem(with_button(text={"tag": "plain_text", "content": ""})) is not None
    assert card_problem(with_button(text={"tag": "plain_text", "content": "x" * 101})) is not None
    assert card_problem(with_button(type="huge")) is not None
    assert card_problem(with_button(behaviors=[{"type": "callback", "value": "x"}])) is not None
    legacy = {k: v for k, v in button.items() if k != "behaviors"} | {"value": {"a": 1}}
    assert card_problem(with_button(behaviors=[])) is not None
    assert card_problem({"schema": "2.0", "body": {"elements": [legacy]}}) is not None
    action = {"tag": "action", "actions": [button]}  # JSON 1.0's block: not in 2.0
    assert card_problem({"schema": "2.0", "body": {"elements": [action]}}) is not None
    assert card_problem({"schema": "2.0"}) is not None
    # The channel never makes a button the platform would refuse: a long label is cut.
    long = json.loads(card("", None, [("L" * 300, press_value("x", "group:oc_1", ""))]))
    assert card_problem(long) is None


async def test_card_buttons_approve_a_held_call(fake: FakeFeishu, tmp_path: Path) -> None:
    driver = FeishuDriver(fake)
    settings = parse_settings(config(tmp_path, driver.channel_settings()), base_dir=tmp_path)
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5.")])
    bot = Bot(settings, model=model)
    await driver.attach(bot.channel_host, settings.channels.feishu)
    await bot.start()
    try:
        request, approval = await ask(fake)
        assert request.msg_type == "interactive" and card_problem(request.content) is None
        assert [(label, value[PRESS]) for label, value in buttons(request)] == [
            ("Approve", f"/approve {approval}"),
            ("Deny", f"/deny {approval}"),
        ]
        before = copy.deepcopy(request.content)

        # A member's click: refused with a toast only the clicker sees; the card stays. (It
        # comes in a frame of type "card", which lark-oapi alone would drop unanswered.)
        answer = await fake.click(MEMBER, request, "Approve", frame_type="card")
        assert answer == {
            "toast": {"type": "error", "content": f"You may not answer request {approval}."}
        }
        assert request.content == before and len(fake.sent_to(GROUP)) == 1

        # The group's manager approves: the toast says so, the card shows the decision and
        # who took it, without buttons; the call runs and the model's loop goes on.
        answer = await fake.click(MANAGER, request, "Approve")
        assert answer["toast"] == {
            "type": "success",
            "content": f"Approved {approval}: transfer runs now.",
        }
        assert buttons(request) == []
        assert approval in shown(request) and "transfer(" in shown(request)
        assert f"Approved {approval}: transfer runs now." in shown(request)
        assert f"<at id={MANAGER}></at>" in card_markdown(request)
        sent = await fake.wait_sent(GROUP, 2)
        assert "Moved 5." in shown(sent[-1])
        assert model.requests[-1].messages[-1].content == "moved 5"

        # A click on the card as a client that had not seen the update showed it: refused.
        answer = await fake.click(MANAGER, request, "Deny", card=before)
        assert answer == {
            "toast": {"type": "error", "content": f"Request {approval} was already answered."}
        }
        await settled(bot)  # a turn the refused click started, had it started one, has run
        assert len(fake.sent_to(GROUP)) == 2 and len(model.requests) == 2
    finally:
        await driver.detach()
        await bot.aclose()


async def test_a_deny_click_over_the_webhook_does_not_run_the_call(tmp_path: Path) -> None:
    """Webhook mode: the click is POSTed to the request URL encrypted and signed; a forged
    one is refused (401); the denial is the toast and the card, and the model is told."""
    from chatfn.runtime.channel_registry import find_channels

    async with FakeFeishu(verification_token="v-tok", encrypt_key="enc-key") as fake:
        driver = FeishuDriver(
            fake, mode="webhook", verification_token="v-tok", encrypt_key="enc-key"
        )
        data = config(tmp_path, driver.channel_settings(), channels={"http": {"port": 0}})
        settings = parse_settings(data, base_dir=tmp_path)
        model = ScriptedModel([call("transfer", amount=7), say("Not moved.")])
        bot = Bot(settings, model=model)
        http = find_channels().get("http").build(bot.channel_host)
        try:
            driver.channel = SPEC.build(bot.channel_host, settings.channels.feishu)
            await http.start()  # on port 0: where the fake posts is known once it listens
            fake.webhook_url = f"http://127.0.0.1:{http.bound_port}/feishu/events"
            driver._task = asyncio.create_task(driver.channel.run())
            async with asyncio.timeout(15):
                await driver.channel.wait_ready()
            await bot.start()
            request, approval = await ask(fake)
            [_, (_, deny)] = buttons(request)
            forged = fake.card_action_event(MANAGER, request, deny)
            assert (await fake.post_webhook(forged, headers={"X-Lark-Signature": "00"}))[0] == 401

            answer = await fake.click(MANAGER, request, "Deny")
            assert answer["toast"] == {
                "type": "success",
                "content": f"Denied {approval}: transfer will not run.",
            }
            assert buttons(request) == [] and f"Denied {approval}" in shown(request)
            sent = await fake.wait_sent(GROUP, 2)
            assert "Not moved." in shown(sent[-1])
            told = model.requests[-1].messages[-1].content or ""
            assert "denied" in told and approval in told
            assert "moved 7" not in json.dumps([m.content for m in model.requests[-1].messages])
        finally:
            await driver.detach()
            await http.stop()
            await bot.aclose()


async def test_a_resent_click_a_forwarded_card_and_a_slow_answer(
    fake: FakeFeishu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same callback delivered twice gets the first one's answer (the command runs once,
    not 'already answered'); a card clicked in another chat than it was sent to does
    nothing; an answer not ready within PRESS_WAIT is a 'being handled' toast and comes as a
    message, the card then updated through the API (PATCH im/v1/messages)."""
    from chatfn.channels.feishu import channel as feishu_channel

    driver = FeishuDriver(fake)
    settings = parse_settings(config(tmp_path, driver.channel_settings()), base_dir=tmp_path)
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5.")] * 2)
    bot = Bot(settings, model=model)
    await driver.attach(bot.channel_host, settings.channels.feishu)
    await bot.start()
    try:
        request, approval = await ask(fake)
        elsewhere = copy.deepcopy(request)
        elsewhere.chat_id = "oc_gother"
        assert await fake.click(MANAGER, elsewhere, "Approve") == {}

        before = copy.deepcopy(request.content)
        first = await fake.click(MANAGER, request, "Approve", event_id="ev-click-1")
        again = await fake.click(MANAGER, request, "Approve", event_id="ev-click-1", card=before)
        assert first["toast"]["type"] == "success" and again == first
        sent = await fake.wait_sent(GROUP, 2)
        await settled(bot)  # a second run of the resent click's command would have sent by now
        assert len(fake.sent_to(GROUP)) == 2 and "Moved 5." in shown(sent[-1])

        monkeypatch.setattr(feishu_channel, "PRESS_WAIT", 0.0)
        request, approval = await ask_again(fake)
        answer = await fake.click(MANAGER, request, "Approve")
        assert answer == {
            "toast": {
                "type": "info",
                "content": f"Your answer to {approval} is being handled: see the chat.",
            }
        }
        sent = await fake.wait_sent(GROUP, 5)
        said = [shown(p) for p in sent[3:]]
        assert f"Approved {approval}: transfer runs now." in said[0]
        assert "Moved 5." in said[-1]
        # The decision came after the click's answer: the card is updated through the API.
        await fake.wait_for(lambda: not buttons(request))
        assert f"Approved {approval}: transfer runs now." in shown(request)
        assert "messages.patch" in fake.calls
    finally:
        await driver.detach()
        await bot.aclose()


async def ask_again(fake: FakeFeishu) -> tuple[Posted, str]:
    """`ask` once more in the same group: the newest request card and its ID."""
    before = len(fake.sent_to(GROUP))
    mention = {
        "key": "@_user_1",
        "id": {"union_id": "on_bot", "user_id": "", "open_id": BOT_OPEN_ID},
        "name": "chatfnbot",
        "tenant_key": "2ca1d211f64f6438",
    }
    await fake.push(
        fake.message_event(GROUP, ASKER, group=True, text="@_user_1 move 5", mentions=[mention])
    )
    request = (await fake.wait_sent(GROUP, before + 1))[-1]
    found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", shown(request))
    assert found, shown(request)
    return request, found.group(1)


async def test_a_click_on_an_expired_request(fake: FakeFeishu, tmp_path: Path) -> None:
    """A request past its time: the approver's click is refused (audited by the core) with a
    toast, and the card says it expired instead of offering buttons nobody can use."""
    driver = FeishuDriver(fake)
    data = config(tmp_path, driver.channel_settings())
    data["bot"]["approval_timeout"] = 60
    settings = parse_settings(data, base_dir=tmp_path)
    model = ScriptedModel([call("transfer", amount=5), say("Too late.")])
    later = 0.0  # the bot's clock runs this far ahead of the real one
    bot = Bot(settings, model=model, clock=lambda: time.time() + later)
    await driver.attach(bot.channel_host, settings.channels.feishu)
    await bot.start()
    try:
        request, approval = await ask(fake)
        later = 61.0  # the request's minute is over
        answer = await fake.click(MANAGER, request, "Approve")
        assert answer["toast"] == {"type": "error", "content": f"Request {approval} has expired."}
        assert buttons(request) == []
        assert approval in shown(request) and f"Request {approval} has expired." in shown(request)
        await bot.approvals.settled()
        assert "moved 5" not in json.dumps([m.content for r in model.requests for m in r.messages])
    finally:
        await driver.detach()
        await bot.aclose()
