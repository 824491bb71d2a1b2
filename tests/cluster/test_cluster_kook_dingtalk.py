"""Two of the new channels together behind `--role gateway` (issue 42: "two of them run
together in one process and behind --role gateway"): KOOK (its WebSocket gateway) and DingTalk
(Stream mode through the official SDK) held by one gateway process, a worker answering, as real
subprocesses on PostgreSQL and RabbitMQ, against the local KOOK and DingTalk servers
(tests/channels/kook/kook_fake.py, tests/channels/dingtalk/dingtalk_fake.py) in this test's
process. Each answer goes back to the platform its message came from, once, in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("dingtalk_stream")

from tests.channels.dingtalk.dingtalk_fake import FakeDingTalk  # noqa: E402
from tests.channels.kook.kook_fake import FakeKook  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_kook_and_dingtalk_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    async with FakeKook() as kook, FakeDingTalk() as ding:
        cfg = cluster_config(
            tmp_path,
            pg_url,
            amqp_prefix,
            partitions=2,
            channels={
                "kook": {
                    "token": kook.token,
                    "api_base": kook.api_base,
                    "send_rate": 0,
                    "state_path": str(tmp_path / "kook"),
                },
                "dingtalk": {
                    "client_id": ding.app_key,
                    "client_secret": ding.app_secret,
                    "api_base": ding.base,
                    "mode": "stream",
                    "send_rate": 0,
                },
            },
        )
        worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
        procs.append(worker)
        await asyncio.to_thread(worker.wait_for, "consuming")
        gateway = Proc(
            [
                "--config",
                str(cfg),
                "--role",
                "gateway",
                "--channel",
                "kook",
                "--channel",
                "dingtalk",
            ],
            tmp_path / "gateway.log",
        )
        procs.append(gateway)
        await asyncio.to_thread(gateway.wait_for, "KOOK channel:")
        await asyncio.to_thread(gateway.wait_for, "DingTalk channel:")
        await asyncio.to_thread(worker.wait_for, "1 live worker(s)")
        # the log line comes after who-am-I; the gateway socket and the stream a moment later
        await kook.wait_for(lambda: kook.connected and kook._session is not None, timeout=30)
        await ding.wait_connected(timeout=30)
        for i in range(3):
            await kook.say("private", "U1", "U1", f"/echo k{i}")
        await kook.say("group", "C1", "U2", "/echo kg", mention=True)
        for i in range(3):
            await ding.push(ding.robot_message(group=None, sender="D1", text=f"/echo d{i}"))
        twice = ding.robot_message(group="cidG1", sender="D2", text="/echo dg", mention=True)
        await ding.push(twice)
        await ding.push(twice)  # DingTalk pushes a message again when unsure: answered once
        await ding.push(
            ding.robot_message(group="cidG1", sender="D2", text="/echo dg1", mention=True)
        )

        async def kook_sent(kind: str, target: str, n: int) -> list[str]:
            await kook.wait_for(lambda: len(kook.sent_to(kind, target)) >= n, timeout=60)
            return [p.content for p in kook.sent_to(kind, target)]

        kook_private = await kook_sent("private", "U1", 3)
        kook_group = await kook_sent("group", "C1", 1)
        ding_private = [p.text for p in await ding.wait_sent("D1", 3, timeout=60)]
        ding_group = [p.text for p in await ding.wait_sent("cidG1", 2, timeout=60)]
    assert [t.split(" pid=")[0] for t in kook_private] == ["k0", "k1", "k2"]
    assert all(" pid=" in t for t in kook_private)  # answered by the worker process
    assert "kg" in kook_group[0]
    assert [t.split(" pid=")[0].strip() for t in ding_private] == ["d0", "d1", "d2"]
    # a group answer @-mentions its asker (reply_with_mention), as DingTalk renders it
    assert [t.split(" pid=")[0].strip() for t in ding_group] == ["@D2 dg", "@D2 dg1"]
    assert len(ding.sent_to("cidG1")) == 2  # the message pushed twice was answered once
