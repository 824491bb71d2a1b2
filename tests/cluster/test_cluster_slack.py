"""Slack in a gateway beside Telegram (`--role gateway --channel slack --channel telegram`: two
platforms in one process holding both connections) with a worker answering, as real
subprocesses on PostgreSQL and RabbitMQ, against the local Slack and Telegram servers
(tests/channels/slack/slack_fake.py, telegram_fake.py) in this test's process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("slack_sdk")
pytest.importorskip("telegram")

from tests.channels.slack.slack_fake import BOT_USER, FakeSlack, read_mrkdwn  # noqa: E402
from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_slack_and_telegram_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    async with FakeSlack() as slack, FakeTelegram() as telegram:
        cfg = cluster_config(
            tmp_path,
            pg_url,
            amqp_prefix,
            partitions=2,
            channels={
                "slack": {
                    "bot_token": slack.bot_token,
                    "app_token": slack.app_token,
                    "api_base": slack.api_base,
                    "send_rate": 0,
                },
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
            + ["--channel", "slack", "--channel", "telegram"],
            tmp_path / "gateway.log",
        )
        procs.append(gateway)
        await asyncio.to_thread(gateway.wait_for, "Slack channel: bot user")
        await asyncio.to_thread(gateway.wait_for, "Telegram channel: @")
        await asyncio.to_thread(worker.wait_for, "1 live worker(s)")
        slack.user("U2001", "Ann")
        for i in range(3):
            await slack.push(slack.callback(slack.message_event("D2001", "U2001", f"/echo p{i}")))
        mention = slack.message_event("C7001", "U2001", f"<@{BOT_USER}> /echo g0")
        await slack.push(slack.callback(dict(mention, type="app_mention")))
        await slack.push(slack.callback(mention))  # the same message: answered once
        await telegram.message(telegram.private(3001), "/echo t0")
        # The chat's next message: a second answer to the first would come before its answer.
        later = slack.message_event("C7001", "U2001", f"<@{BOT_USER}> /echo g1")
        await slack.push(slack.callback(later))
        private = await slack.wait_sent("D2001", 3, timeout=60)
        in_channel = await slack.wait_sent("C7001", 2, timeout=60)
        [on_telegram] = await telegram.wait_sent(3001, 1, timeout=60)
    # Answered by the worker (its pid), in order, once each, sent by the gateway's channels.
    texts = [read_mrkdwn(p.text)[0] for p in private]
    assert [t.split(" pid=")[0] for t in texts] == ["p0", "p1", "p2"]
    assert all(" pid=" in t for t in texts)
    assert [read_mrkdwn(p.text)[0].split(" pid=")[0] for p in in_channel] == ["g0", "g1"]
    assert on_telegram.text.split(" pid=")[0] == "t0"
