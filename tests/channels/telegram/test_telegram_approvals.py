"""Approvals through Telegram's buttons (issue 40 §2), against the local Bot API server: the
request comes with an inline keyboard (Approve / Deny), a press is a callback query the channel
answers and turns into the presser's `/approve ID`; a member's press is refused, a group
admin's (getChatMember: administrator) runs the call and the model's loop goes on."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("telegram")

from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel, call, say  # noqa: E402
from tests.channels.approval_plugin import risky_plugin  # noqa: E402
from tests.channels.telegram.telegram_driver import TelegramDriver  # noqa: E402
from tests.channels.telegram.telegram_fake import BOT_USERNAME, FakeTelegram  # noqa: E402

PLUGIN = risky_plugin("risky_tg")
GROUP = -1001234567890


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_buttons_approve_a_held_call(fake: FakeTelegram, tmp_path: Path) -> None:
    plugin = tmp_path / "risky_tg.py"
    plugin.write_text(PLUGIN)
    driver = TelegramDriver(fake)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'tg.db'}"},
            "plugins": {"paths": [str(plugin)]},
            "bot": {"name": "tgbot", "admins": ["9999"], "trust_group_admins": True},
            "channels": {"telegram": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5.")])
    bot = Bot(settings, model=model)
    await driver.attach(bot.channel_host, settings.channels.telegram)
    await bot.start()
    try:
        group = fake.group(GROUP)
        mention = [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]
        await fake.message(
            group, f"@{BOT_USERNAME} move 5", sender=fake.user(1001), entities=mention
        )
        [request] = await fake.wait_sent(GROUP, 1)
        found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", request.text)
        assert found, request.text
        approval = found.group(1)
        assert request.buttons == [
            ("Approve", f"/approve {approval}"),
            ("Deny", f"/deny {approval}"),
        ]

        # A member's press is refused (and answered, so the button stops spinning).
        member_press = await fake.press(
            group, fake.user(1002, "Bob"), request, f"/approve {approval}"
        )
        sent = await fake.wait_sent(GROUP, 2)
        assert f"You may not answer request {approval}." in sent[1].text
        assert member_press in fake.answered

        fake.members[(GROUP, 1003)] = "administrator"
        await fake.press(group, fake.user(1003, "Cat"), request, f"/approve {approval}")
        sent = await fake.wait_sent(GROUP, 4)
        texts = [s.text for s in sent]
        assert any(f"Approved {approval}: transfer runs now." in t for t in texts[2:])
        assert "Moved 5." in texts[-1]
        assert model.requests[-1].messages[-1].content == "moved 5"
    finally:
        await driver.detach()
        await bot.aclose()
