"""The Telegram channel in a gateway (`--role gateway --channel telegram`, holding the Bot API
connection) with a worker answering, as real subprocesses on PostgreSQL and RabbitMQ, against
the local Bot API server (tests/channels/telegram/telegram_fake.py) in this test's process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("telegram")

from tests.channels.telegram.telegram_fake import FakeTelegram  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_telegram_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    async with FakeTelegram() as fake:
        cfg = cluster_config(
            tmp_path,
            pg_url,
            amqp_prefix,
            partitions=2,
            channels={
                "telegram": {
                    "token": fake.token,
                    "base_url": fake.base_url,
                    "poll_timeout": 2,
                    "send_rate": 0,
                }
            },
        )
        worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
        procs.append(worker)
        await asyncio.to_thread(worker.wait_for, "consuming")
        gateway = Proc(
            ["--config", str(cfg), "--role", "gateway", "--channel", "telegram"],
            tmp_path / "gateway.log",
        )
        procs.append(gateway)
        await asyncio.to_thread(gateway.wait_for, "Telegram channel: @")
        await asyncio.to_thread(worker.wait_for, "1 live worker(s)")
        group = fake.group(-1001000000777)
        mention = [{"type": "mention", "offset": 0, "length": 16}]
        for i in range(3):
            await fake.message(fake.private(2001), f"/echo p{i}")
        await fake.message(group, "@chatfn_test_bot /echo g0", entities=mention)
        private = await fake.wait_sent(2001, 3, timeout=60)
        [in_group] = await fake.wait_sent(group["id"], 1, timeout=60)
    # Answered by the worker (its pid), in order, once each, sent by the gateway's channel.
    assert [s.text.split(" pid=")[0] for s in private] == ["p0", "p1", "p2"]
    assert all(" pid=" in s.text for s in private)
    assert in_group.text.split(" pid=")[0].endswith("g0")
