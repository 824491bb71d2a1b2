"""Failover that holds (issue 26), with real gateway and worker processes on the machine's
PostgreSQL and RabbitMQ: reminders outlive the worker that set them; a worker stopped with
SIGSTOP loses its chats within `broker.redelivery_timeout` and, resumed, neither stores nor
sends anything for them (fencing); outages of RabbitMQ and PostgreSQL, made with a TCP proxy of
our own between the workers and the service (tests/fakes/tcp_proxy.py: the shared services are
never stopped), leave nothing unacknowledged, nothing unstored sent, nothing sent twice."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta

import aiohttp
import pytest
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from yarl import URL

from tests.cluster.conftest import AMQP, Proc, cluster_config
from tests.cluster.test_cluster import check_history, send_all, start_cluster
from tests.cluster.test_cluster_reminders import reminder_rows, settled
from tests.fakes.tcp_proxy import TcpProxy
from tests.kit import until, until_sync

pytestmark = pytest.mark.services


@pytest.fixture
def proxies() -> Iterator[Callable[[str], TcpProxy]]:
    """`proxies(url)`: a started TcpProxy to the host and port of `url`; closed at the end."""
    made: list[TcpProxy] = []

    def make(url: str) -> TcpProxy:
        u = make_url(url) if "://" in url and "+" in url.split("://")[0] else URL(url)
        proxy = TcpProxy(u.host or "127.0.0.1", int(u.port or 0)).start()
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


def via(url: str, proxy: TcpProxy) -> str:
    """`url` with the proxy's port: the process connects through it."""
    if url.startswith("amqp"):
        return str(URL(url).with_port(proxy.port))
    return make_url(url).set(port=proxy.port).render_as_string(hide_password=False)


def start_workers_via(
    tmp_path, pg_url, prefix, procs, db: list[str], amqp: list[str], **sections
) -> tuple[str, list[Proc]]:
    """A gateway (direct to both services) and one worker per `db`/`amqp` URL pair (through
    proxies): as `start_cluster`, with a config file per worker."""
    config = cluster_config(tmp_path, pg_url, prefix, **sections)
    workers = []
    for i, (db_url, amqp_url) in enumerate(zip(db, amqp, strict=True)):
        data = yaml.safe_load(config.read_text())
        data["storage"]["url"] = db_url
        data["broker"]["url"] = amqp_url
        own = tmp_path / f"worker{i}.yaml"
        own.write_text(yaml.safe_dump(data))
        workers.append(
            Proc(["--config", str(own), "--role", "worker"], tmp_path / f"worker{i}.log")
        )
    procs.extend(workers)
    for w in workers:
        w.wait_for("consuming")
    gw = Proc(
        ["--config", str(config), "--role", "gateway", "--channel", "http", "--port", "0"],
        tmp_path / "gateway.log",
    )
    procs.append(gw)
    port = gw.http_port()
    gw.wait_for("chatfn started")
    for w in workers:
        w.wait_for(f"{len(workers)} live worker(s)")
    return f"http://127.0.0.1:{port}", workers


def query(pg_url: str, sql: str, **params) -> list[tuple]:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(text(sql), params)]
    engine.dispose()
    return rows


async def post(base: str, chat: str, body_text: str, timeout: float = 60) -> list[str]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        body = {"chat_id": chat, "sender_id": "alice", "text": body_text}
        async with session.post(f"{base}/v1/messages", json=body) as r:
            assert r.status == 200, await r.text()
            return [x["text"] for x in (await r.json())["replies"]]


def test_reminders_of_a_sigkilled_worker_fire_once_on_the_survivor(
    tmp_path, pg_url, amqp_prefix, procs
):
    """Five reminders set through one worker, which is SIGKILLed before they fall due: the
    other worker delivers each, once, within a few seconds of its due time."""
    reminders = {"timezone": "UTC", "sweep_interval": 0.5}
    base, workers = start_cluster(tmp_path, pg_url, amqp_prefix, procs, reminders=reminders)

    async def set_five() -> None:
        for i in range(5):
            [reply] = await post(base, "k", f"/reminder_set in 4s r{i}")
            assert "r" in reply, reply

    asyncio.run(set_five())
    [creator] = [w for w in workers if re.search(r"reminder \w+ set by", w.log.read_text())]
    creator.kill()
    # Delivered and none left active: nothing is left that could deliver one again.
    until_sync(lambda: settled(pg_url, 5), 12, "all five reminders fired", interval=0.1)
    assert reminder_rows(pg_url) == Counter({f"r{i}": 1 for i in range(5)})
    for next_run, fired_at in query(pg_url, "SELECT next_run, last_fired_at FROM reminders"):
        assert fired_at - next_run < timedelta(seconds=3), (next_run, fired_at)


def owners(base: str, chats: list[str]) -> dict[str, str]:
    """chat -> pid of the worker that answers it (one echo each)."""

    async def ask() -> list[list[str]]:
        return await asyncio.gather(*(post(base, c, f"/echo hello {c}") for c in chats))

    return {c: r[0].split("pid=")[1] for c, r in zip(chats, asyncio.run(ask()), strict=True)}


def in_transaction(pg_url: str) -> int:
    """Sessions of the test's database waiting, inside a transaction, for their client."""
    db = make_url(pg_url).database
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = :db"
        " AND state = 'idle in transaction'"
    )
    return query(pg_url, sql, db=db)[0][0]


def test_stopped_worker_loses_its_chats_in_time_and_resumed_commits_and_sends_nothing(
    tmp_path, pg_url, amqp_prefix, procs, proxies
):
    """A worker stopped (SIGSTOP: a machine gone without closing its connections) in the
    middle of its turns' writes: its database connection is held at that moment (a TCP proxy
    keeps the server's answers back), so each turn is stopped inside a write transaction the
    server has executed but not committed. The other worker answers those chats within
    `broker.redelivery_timeout` (4 s) plus the turn. Resumed (SIGCONT, answers released), the
    stopped worker commits nothing more for them (its transactions are fenced, or ended by the
    server while it was stopped), and sends nothing: no second audit or history row, each
    request gets one reply, and the gateway never sees a reply relayed again."""
    delay = 0.5
    db = [proxies(pg_url), proxies(pg_url)]
    base, workers = start_workers_via(
        tmp_path,
        pg_url,
        amqp_prefix,
        procs,
        db=[via(pg_url, p) for p in db],
        amqp=[AMQP, AMQP],
        echo={"delay": delay},
    )
    pid_of = owners(base, [f"s{i}" for i in range(12)])
    victim, survivor = workers
    mine = [c for c, pid in pid_of.items() if pid == str(victim.p.pid)][:3]
    assert mine, pid_of
    answered: dict[str, float] = {}
    replies: dict[str, list[str]] = {}
    stopped = [0.0]

    async def run() -> None:
        async def chat(c: str) -> None:
            for i in range(2):
                replies[f"{c}x{i}"] = await post(base, c, f"/echo {c}x{i}")
                answered[f"{c}x{i}"] = time.monotonic()

        task = asyncio.gather(*(chat(c) for c in mine))
        # Each first message stored: its turn sleeps in echo; its next write is the audit row.
        first = [f"/echo {c}x0" for c in mine]
        sql = "SELECT count(*) FROM messages WHERE text IN :t"
        sql = sql.replace(":t", "(" + ",".join(f"'{t}'" for t in first) + ")")
        await until(lambda: query(pg_url, sql)[0][0] >= len(mine), 30, "first messages not stored")
        db[0].hold()
        # The audit writes executed, not committed.
        await until(lambda: in_transaction(pg_url) >= len(mine), 30, "audit writes not held")
        victim.p.send_signal(signal.SIGSTOP)
        stopped[0] = time.monotonic()
        await task

    try:
        asyncio.run(run())
    finally:
        victim.p.send_signal(signal.SIGCONT)
        db[0].release()
    for c in mine:
        assert replies[f"{c}x0"] == [f"{c}x0 pid={survivor.p.pid}"], replies
        took = answered[f"{c}x0"] - stopped[0]
        assert took < 4 + delay, f"{c} answered {took:.1f} s after the SIGSTOP"
    victim.stop()  # resumed, then stopped: what it would still commit or send has landed
    for c in mine:
        for i in range(2):
            text_ = f"/echo {c}x{i}"
            rows = query(pg_url, "SELECT role FROM messages WHERE text = :t", t=text_)
            assert rows == [("user",)], (text_, rows)
            audit = "SELECT count(*) FROM tool_calls WHERE arguments LIKE :a"
            assert query(pg_url, audit, a=f'%"{c}x{i}"%') == [(1,)], text_
            assert len(replies[f"{c}x{i}"]) == 1, replies
    assert "repeated reply" not in procs[-1].log.read_text()


def ready_messages(prefix: str, partitions: int = 8) -> int:
    """Messages waiting in the partition queues (after the workers stopped: everything they
    had taken and not acknowledged is back there)."""
    import aio_pika

    async def count() -> int:
        conn = await aio_pika.connect(AMQP, timeout=5)
        try:
            channel = await conn.channel()
            total = 0
            for k in range(partitions):
                queue = await channel.declare_queue(f"{prefix}.in.{k}", passive=True)
                total += queue.declaration_result.message_count or 0
            return total
        finally:
            await conn.close()

    return asyncio.run(count())


def test_a_broker_outage_leaves_every_message_answered_once_and_acknowledged(
    tmp_path, pg_url, amqp_prefix, procs, proxies
):
    """The workers' RabbitMQ connections are cut for 5 s under load (a TCP proxy drops them
    and refuses new ones): every message is answered once, and once the workers stop, no
    message is left in the queues (each was acknowledged, or redelivered and then
    acknowledged)."""
    mq = proxies(AMQP)
    base, workers = start_workers_via(
        tmp_path,
        pg_url,
        amqp_prefix,
        procs,
        db=[pg_url, pg_url],
        amqp=[via(AMQP, mq)] * 2,
        echo={"delay": 0.1},
    )
    progress: dict[str, list[str]] = {}

    async def run() -> dict[str, list[str]]:
        task = asyncio.create_task(
            send_all(base, chats=10, per_chat=6, stagger=0.01, progress=progress)
        )
        while len(progress) < 15 and not task.done():
            await asyncio.sleep(0.01)
        mq.cut()
        await asyncio.sleep(5)  # kept: the test is about an outage of this length
        mq.restore()
        return await task

    replies = asyncio.run(run())
    assert len(replies) == 60
    for key, texts in replies.items():
        assert len(texts) == 1 and texts[0].startswith(f"{key} pid="), (key, texts)
    check_history(pg_url, 10, 6)
    for w in workers:
        w.stop()
    assert ready_messages(amqp_prefix) == 0


def test_a_database_outage_sends_nothing_unstored_holds_no_answer_and_repeats_nothing(
    tmp_path, pg_url, amqp_prefix, procs, proxies
):
    """The workers' PostgreSQL connections are cut for 5 s under load. Every request is
    answered within the gateway's wait (function_calls.total_timeout 6 s + the redelivery
    timeout): with its reply, which is then stored, or with the one sentence saying the
    database is unavailable. No message is left unacknowledged, and workers started again
    afterwards run no turn a second time."""
    db = proxies(pg_url)
    base, workers = start_workers_via(
        tmp_path,
        pg_url,
        amqp_prefix,
        procs,
        db=[via(pg_url, db)] * 2,
        amqp=[AMQP, AMQP],
        echo={"delay": 0.1},
        function_calls={"total_timeout": 6},
        storage={"url": pg_url, "busy_retry": 3},
    )
    progress: dict[str, list[str]] = {}
    took: list[float] = []

    async def run() -> dict[str, list[str]]:
        async def timed() -> dict[str, list[str]]:
            return await send_all(base, chats=10, per_chat=6, stagger=0.01, progress=progress)

        task = asyncio.create_task(timed())
        while len(progress) < 15 and not task.done():
            await asyncio.sleep(0.01)
        db.cut()
        await asyncio.sleep(5)  # kept: the test is about an outage of this length
        db.restore()
        t0 = time.monotonic()
        result = await task
        took.append(time.monotonic() - t0)
        return result

    replies = asyncio.run(run())
    assert len(replies) == 60
    told = 0
    stored = {t for (t,) in query(pg_url, "SELECT text FROM messages WHERE role = 'assistant'")}
    for key, texts in replies.items():
        assert len(texts) == 1, (key, texts)
        if texts[0].startswith("Sorry, I could not save"):
            told += 1
            continue
        assert texts[0].startswith(f"{key} pid="), (key, texts)
        assert texts[0] in stored, f"{texts[0]!r} was sent but not stored"
    assert told < 60
    answers = len(stored)
    for w in workers:
        w.stop()
    assert ready_messages(amqp_prefix) == 0
    # Started again: nothing owed, nothing run a second time.
    config = tmp_path / "worker0.yaml"
    again = Proc(["--config", str(config), "--role", "worker"], tmp_path / "again.log")
    procs.append(again)
    again.wait_for("consuming")
    again.stop()  # a turn it started (none should be) is finished or abandoned on the stop
    assert len(query(pg_url, "SELECT id FROM messages WHERE role = 'assistant'")) == answers
    assert "repeated reply" not in procs[2].log.read_text()
