"""Three platforms of three kinds behind `--role gateway` (issue 36: "three platforms of different
kinds run together in one process and behind --role gateway"): LINE (webhooks in, signed, on the
gateway's web server), Mattermost (a WebSocket out to the server) and IRC (a real ngircd, a TCP
client), held by one gateway process while a worker answers, as real subprocesses on PostgreSQL
and RabbitMQ. The platforms' users are the contract drivers' (tests/channels/<name>/): each
answer goes back to the platform its message came from, once, in order, from the worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("linebot")

from tests.channels.contract import Chat  # noqa: E402
from tests.channels.irc.irc_driver import IrcDriver  # noqa: E402
from tests.channels.irc.ngircd_server import NgIrcd, ngircd_binary  # noqa: E402
from tests.channels.line.line_driver import LineDriver  # noqa: E402
from tests.channels.line.line_fake import FakeLine  # noqa: E402
from tests.channels.mattermost.mattermost_driver import MattermostDriver  # noqa: E402
from tests.channels.mattermost.mattermost_fake import FakeMattermost  # noqa: E402
from tests.cluster.conftest import Proc, cluster_config  # noqa: E402
from tests.kit import free_port, until  # noqa: E402

pytestmark = pytest.mark.services


async def test_a_gateway_holds_line_mattermost_and_irc_and_a_worker_answers(
    tmp_path: Path, pg_url: str, amqp_prefix: str, procs: list[Proc]
) -> None:
    if ngircd_binary() is None:
        pytest.fail("ngircd is not installed (.ci/install-servers.sh installs it)")
    ngircd = NgIrcd()
    ngircd.start()
    try:
        async with FakeLine() as line_fake, FakeMattermost() as mm_fake:
            line, mm = LineDriver(line_fake), MattermostDriver(mm_fake)
            irc = await IrcDriver(ngircd).open()
            try:
                await run_three(tmp_path, pg_url, amqp_prefix, procs, line, mm, irc)
            finally:
                await irc.close()
    finally:
        ngircd.stop()


async def run_three(
    tmp_path: Path,
    pg_url: str,
    amqp_prefix: str,
    procs: list[Proc],
    line: LineDriver,
    mm: MattermostDriver,
    irc: IrcDriver,
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cfg = cluster_config(
        tmp_path,
        pg_url,
        amqp_prefix,
        partitions=2,
        channels={
            # The gateway's web server: LINE's webhook route mounts on this listener.
            "http": {"host": "127.0.0.1", "port": port},
            "line": {**line.channel_settings(), "public_url": base},
            "mattermost": mm.channel_settings(),
            "irc": irc.channel_settings(),
        },
    )
    line.fake.callback_url = base + "/line/webhook"
    line.fake.allow_http = True
    worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
    procs.append(worker)
    await asyncio.to_thread(worker.wait_for, "consuming")
    gateway = Proc(
        ["--config", str(cfg), "--role", "gateway"]
        + ["--channel", "http"]  # the port LINE's webhook is served on
        + ["--channel", "line", "--channel", "mattermost", "--channel", "irc"],
        tmp_path / "gateway.log",
    )
    procs.append(gateway)
    for label in ("LINE channel:", "Mattermost channel:", "IRC channel:"):
        await asyncio.to_thread(gateway.wait_for, label, 60)
    await asyncio.to_thread(worker.wait_for, "1 live worker(s)", 60)
    await until(lambda: mm.fake.connected() >= 1, 30, "the gateway's Mattermost WebSocket")

    chat = Chat("private", "3001")
    for i in range(3):
        await line.say(chat, f"/echo l{i}")
        await mm.say(chat, f"/echo m{i}", sender="3001")
        await irc.say(chat, f"/echo i{i}")
    got = {
        "line": await line.sent(chat, 3, timeout=60),
        "mattermost": await mm.sent(chat, 3, timeout=60),
        "irc": await irc.sent(chat, 3, timeout=60),
    }
    for name, prefix in (("line", "l"), ("mattermost", "m"), ("irc", "i")):
        texts = [s.text for s in got[name]]
        assert [t.split(" pid=")[0].strip() for t in texts] == [f"{prefix}{i}" for i in range(3)]
        assert all(" pid=" in t for t in texts)  # answered by the worker process
    pids = {t.split(" pid=")[1].strip() for s in got.values() for t in (x.text for x in s)}
    assert len(pids) == 1 and str(gateway.p.pid) not in pids
