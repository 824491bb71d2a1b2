"""Approvals through Slack's buttons (issue 40 §2), against the local Slack: the request comes
as Block Kit (a section and an actions block of Approve / Deny buttons, which the fake checks
as Slack does), a press is a `block_actions` interaction over Socket Mode that the channel
acknowledges and turns into the presser's `/approve ID`; a member's press is refused, a
workspace admin's (users.info is_admin) runs the call and the model's loop goes on."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("slack_sdk")

import aiohttp  # noqa: E402

from chatfn.channels.slack.send import button_block, section  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel, call, say  # noqa: E402
from tests.channels.approval_plugin import risky_plugin  # noqa: E402
from tests.channels.contract import _echo, contract_registry  # noqa: E402
from tests.channels.slack.slack_driver import SlackDriver  # noqa: E402
from tests.channels.slack.slack_fake import BOT_USER, FakeSlack, Posted, block_problem  # noqa: E402
from tests.channels.slack.test_slack import SECRET, signed  # noqa: E402
from tests.kit import until  # noqa: E402

PLUGIN = risky_plugin("risky_slack")
CHANNEL = "C0APPROVE"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def test_the_fake_refuses_blocks_slack_refuses() -> None:
    good = [section("hi"), button_block([("Approve", "/approve K3F9QX")])]
    assert block_problem(good) is None
    assert block_problem([{"type": "actions", "elements": []}]) is not None
    assert block_problem([{"type": "actions", "elements": [{"type": "button"}]}]) is not None
    no_id = {"type": "button", "text": {"type": "plain_text", "text": "Go"}, "value": "x"}
    assert block_problem([{"type": "actions", "elements": [no_id]}]) is not None
    assert block_problem([{"type": "section"}]) is not None
    assert button_block([("Long", "x" * 2001)]) is None  # no button Slack would refuse


async def test_buttons_approve_a_held_call(fake: FakeSlack, tmp_path: Path) -> None:
    plugin = tmp_path / "risky_slack.py"
    plugin.write_text(PLUGIN)
    driver = SlackDriver(fake)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'slack.db'}"},
            "plugins": {"paths": [str(plugin)]},
            "bot": {"name": "slackbot", "admins": ["U9999"], "trust_group_admins": True},
            "channels": {"slack": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5.")])
    bot = Bot(settings, model=model)
    await driver.attach(bot.channel_host, settings.channels.slack)
    await bot.start()
    try:
        fake.user("U1001", "Ann")
        fake.user("U1002", "Bob")
        fake.user("U1003", "Cat", is_admin=True)
        event = fake.message_event(CHANNEL, "U1001", f"<@{BOT_USER}> move 5", kind="app_mention")
        await fake.push(fake.callback(event))
        [request] = await fake.wait_sent(CHANNEL, 1)
        found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", request.text)
        assert found, request.text
        approval = found.group(1)
        [text_block, actions] = request.blocks
        assert text_block["type"] == "section" and approval in text_block["text"]["text"]
        assert actions["type"] == "actions"
        assert [(e["text"]["text"], e["value"]) for e in actions["elements"]] == [
            ("Approve", f"/approve {approval}"),
            ("Deny", f"/deny {approval}"),
        ]

        # A member's press is refused (and acknowledged, as Slack requires within 3 s).
        pressed = await fake.press("U1002", request, f"/approve {approval}")
        sent = await fake.wait_sent(CHANNEL, 2)
        assert f"You may not answer request {approval}." in sent[1].text
        await until(lambda: pressed in fake.acked)

        await fake.press("U1003", request, f"/approve {approval}")
        sent = await fake.wait_sent(CHANNEL, 4)
        texts = [s.text for s in sent]
        assert any(f"Approved {approval}: transfer runs now." in t for t in texts[2:])
        assert "Moved 5." in texts[-1]
        assert model.requests[-1].messages[-1].content == "moved 5"
    finally:
        await driver.detach()
        await bot.aclose()


async def test_a_press_posted_to_the_interactivity_url(fake: FakeSlack, tmp_path: Path) -> None:
    """With the Events API, Slack POSTs an interaction form-encoded (field `payload`), signed
    like events, to the Interactivity Request URL (/slack/events here): answered 200, and the
    button's value is the presser's message, answered in the message's thread."""
    from chatfn.channels.slack import SPEC
    from chatfn.runtime.channel_registry import find_channels

    driver = SlackDriver(fake, app_token=None, signing_secret=SECRET)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'events.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False},
            "channels": {"slack": driver.channel_settings(), "http": {"port": 0}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    try:
        driver.channel = SPEC.build(bot.channel_host, settings.channels.slack)
        await http.start()  # on port 0: the URL is known once it listens
        port = http.bound_port
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        fake.user("U77", "Dee")
        button = button_block([("Go", "press me")])
        assert button is not None
        posted = Posted("C0PRESS", "choose", "1700000000.000100", fake.next_ts(), blocks=[button])
        payload = fake.block_actions("U77", posted, "press me")
        body = urlencode({"payload": json.dumps(payload)}).encode()
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        url = f"http://127.0.0.1:{port}/slack/events"
        async with aiohttp.ClientSession() as session:
            bad = {**signed(body, secret="wrong"), **form}
            async with session.post(url, data=body, headers=bad) as r:
                assert r.status == 401
            async with session.post(url, data=body, headers={**signed(body), **form}) as r:
                assert r.status == 200
        [reply] = await fake.wait_sent("C0PRESS", 1)
        assert reply.text == "echo: press me"
        assert reply.thread_ts == "1700000000.000100"
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()
