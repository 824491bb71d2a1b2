"""QQ official bots in a gateway beside Slack (`--role gateway --channel qq --channel slack`)
with a worker answering, as real subprocesses on PostgreSQL and RabbitMQ, against the local QQ
and Slack servers (tests/channels/qq/qq_fake.py, slack_fake.py) in this test's process: the
gateway holds the QQ session and the passive-reply state, the worker's replies carry the
`msg_id` they answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("slack_sdk")

from tests.channels.qq.qq_fake import FakeQQ  # noqa: E402
from tests.channels.slack.slack_fake import FakeSlack, read_mrkdwn  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_qq_and_slack_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    async with FakeQQ() as qq, FakeSlack() as slack:
        cfg = cluster_config(
            tmp_path,
            pg_url,
            amqp_prefix,
            partitions=2,
            channels={
                "qq": {
                    "app_id": qq.app_id,
                    "secret": qq.secret,
                    "api_base": qq.base,
                    "token_url": qq.token_url,
                    "send_rate": 0,
                    "mode": "websocket",
                },
                "slack": {
                    "bot_token": slack.bot_token,
                    "app_token": slack.app_token,
                    "api_base": slack.api_base,
                    "send_rate": 0,
                },
            },
        )
        worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
        procs.append(worker)
        await asyncio.to_thread(worker.wait_for, "consuming")
        gateway = Proc(
            ["--config", str(cfg), "--role", "gateway", "--channel", "qq", "--channel", "slack"],
            tmp_path / "gateway.log",
        )
        procs.append(gateway)
        await asyncio.to_thread(gateway.wait_for, "QQ gateway ready")
        await asyncio.to_thread(gateway.wait_for, "Slack channel: bot user")
        await asyncio.to_thread(worker.wait_for, "1 live worker(s)")
        asked = []
        for i in range(3):
            d = qq.message_event(
                "C2C_MESSAGE_CREATE", target="", sender="U1", content=f"/echo p{i}"
            )
            asked.append(d["id"])
            await qq.push("C2C_MESSAGE_CREATE", d)
        g = qq.message_event(
            "GROUP_AT_MESSAGE_CREATE", target="G1", sender="M1", content=" /echo g"
        )
        await qq.push("GROUP_AT_MESSAGE_CREATE", g)
        await qq.push("GROUP_AT_MESSAGE_CREATE", g)  # QQ may push a message twice: answered once
        # The chat's next message: a second answer to the first would come before its answer.
        g1 = qq.message_event(
            "GROUP_AT_MESSAGE_CREATE", target="G1", sender="M1", content=" /echo g1"
        )
        await qq.push("GROUP_AT_MESSAGE_CREATE", g1)
        slack.user("U2001", "Ann")
        await slack.push(slack.callback(slack.message_event("D2001", "U2001", "/echo s0")))
        private = await qq.wait_sent("c2c", "U1", 3, timeout=60)
        in_group = await qq.wait_sent("group", "G1", 2, timeout=60)
        [on_slack] = await slack.wait_sent("D2001", 1, timeout=60)
    assert [p.content.split(" pid=")[0] for p in private] == ["p0", "p1", "p2"]
    assert all(" pid=" in p.content for p in private)
    assert [p.msg_id for p in private] == asked  # passive replies, sent by the gateway
    # no <@M1>: QQ shows a mention in a plain-text group message as its raw token
    assert [p.content.split(" pid=")[0] for p in in_group] == ["g", "g1"]
    assert [p.msg_id for p in in_group] == [g["id"], g1["id"]]
    assert read_mrkdwn(on_slack.text)[0].split(" pid=")[0] == "s0"
