"""Approvals through Discord's buttons (issue 40 §2), against the local Discord fake: the
request comes with Approve / Deny buttons (message components), a press (INTERACTION_CREATE) is
acknowledged and becomes the presser's `/approve ID`; a member's press is refused, a guild
admin's (a role with ADMINISTRATOR) runs the call and the model's loop goes on."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("discord")

from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel, call, say  # noqa: E402
from tests.channels.approval_plugin import risky_plugin  # noqa: E402
from tests.channels.discord.discord_driver import DiscordDriver  # noqa: E402
from tests.channels.discord.discord_fake import BOT_ID, FakeDiscord, user  # noqa: E402

PLUGIN = risky_plugin("risky_dc")
CHANNEL = 6001


@pytest.fixture
async def server() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


def _buttons(message: dict) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [
        (b["label"], b["custom_id"]) for row in message["components"] for b in row["components"]
    ]


async def test_buttons_approve_a_held_call(server: FakeDiscord, tmp_path: Path) -> None:
    plugin = tmp_path / "risky_dc.py"
    plugin.write_text(PLUGIN)
    driver = DiscordDriver(server)
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'dc.db'}"},
            "plugins": {"paths": [str(plugin)]},
            "bot": {"name": "dcbot", "admins": ["9999"], "trust_group_admins": True},
            "channels": {"discord": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([call("transfer", amount=5), say("Moved 5.")])
    bot = Bot(settings, model=model)
    await driver.attach(bot.channel_host, settings.channels.discord)
    await bot.start()
    try:
        guild = server.guild_of(CHANNEL)
        await server.say(
            CHANNEL,
            f"<@{BOT_ID}> move 5",
            author=1001,
            mentions=[user(BOT_ID, "chatfn-bot", bot=True)],
        )
        [request] = await server.wait_sent(CHANNEL, 1)
        found = re.search(r"Approval needed \(([A-Z0-9]{6})\)", request.payload["content"])
        assert found, request.payload
        approval = found.group(1)
        assert _buttons(request.payload) == [
            ("Approve", f"/approve {approval}"),
            ("Deny", f"/deny {approval}"),
        ]

        member = server.press(CHANNEL, 1002, request, f"/approve {approval}")
        sent = await server.wait_sent(CHANNEL, 2)
        assert f"You may not answer request {approval}." in sent[1].payload["content"]
        assert (member, 6) in server.interactions  # deferred: the button stops spinning

        server.press(CHANNEL, 1003, request, f"/approve {approval}", roles=[guild.admin_role])
        sent = await server.wait_sent(CHANNEL, 4)
        texts = [s.payload["content"] for s in sent]
        assert any(f"Approved {approval}: transfer runs now." in t for t in texts[2:])
        assert "Moved 5." in texts[-1]
        assert model.requests[-1].messages[-1].content == "moved 5"
    finally:
        await driver.detach()
        await bot.aclose()
