"""Discord in a gateway beside Telegram (`--role gateway --channel discord --channel telegram`:
two platforms in one process holding both connections) with a worker answering, as real
subprocesses on PostgreSQL and RabbitMQ, against the local Discord and Telegram servers
(tests/channels/discord/discord_fake.py, telegram_fake.py) in this test's process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("discord")
pytest.importorskip("telegram")

from tests.channels.discord.discord_driver import visible  # noqa: E402
from tests.channels.discord.discord_fake import BOT_ID, FakeDiscord, user  # noqa: E402
from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402
from tests.kit import wait_event  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_discord_and_telegram_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    async with FakeDiscord() as discord, FakeTelegram() as telegram:
        cfg = cluster_config(
            tmp_path,
            pg_url,
            amqp_prefix,
            partitions=2,
            channels={
                "discord": {"token": discord.token, "guild_ready_timeout": 0.1, **discord.urls},
                "telegram": {
                    "token": telegram.token,
                    "base_url": telegram.base_url,
                    "poll_timeout": 2,
                    "send_rate": 0,
                },
            },
        )
        worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
        procs.append(worker)
        await asyncio.to_thread(worker.wait_for, "consuming")
        gateway = Proc(
            ["--config", str(cfg), "--role", "gateway"]
            + ["--channel", "discord", "--channel", "telegram"],
            tmp_path / "gateway.log",
        )
        procs.append(gateway)
        await asyncio.to_thread(gateway.wait_for, "Discord channel: logged in as")
        await asyncio.to_thread(gateway.wait_for, "Telegram channel: @")
        await asyncio.to_thread(worker.wait_for, "1 live worker(s)")
        await wait_event(discord.connected, 30, "the gateway did not connect to Discord")
        for i in range(3):
            await discord.say(None, f"/echo p{i}", author=2001, dm=True)
        await discord.say(
            7001, f"<@{BOT_ID}> /echo g0", author=2002, mentions=[user(BOT_ID, bot=True)]
        )
        await telegram.message(telegram.private(3001), "/echo t0")
        private = await discord.wait_sent(discord.dm_channel(2001), 3, timeout=60)
        [in_group] = await discord.wait_sent(7001, 1, timeout=60)
        [on_telegram] = await telegram.wait_sent(3001, 1, timeout=60)
    # Answered by the worker (its pid), in order, once each, sent by the gateway's channels.
    texts = [visible(s.payload["content"])[0] for s in private]
    assert [t.split(" pid=")[0] for t in texts] == ["p0", "p1", "p2"]
    assert all(" pid=" in t for t in texts)
    assert visible(in_group.payload["content"])[0].split(" pid=")[0].endswith("g0")
    assert on_telegram.text.split(" pid=")[0] == "t0"
