"""The admin console on a gateway of a real cluster (gateway + two workers as subprocesses,
PostgreSQL, RabbitMQ, a fake OpenAI-compatible model): the overview reads the shared database,
so it counts every worker's turns; each worker's counters reach the gateway through its metric
snapshot in the database (a worker serves no /metrics); a model set in the gateway's console
is the model the worker answering that chat's next message uses."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from chatfn.channels.http.admin.passwords import hash_password
from tests.cluster.test_cluster import start_cluster
from tests.cluster.test_cluster_limits import fake_model, models, post  # noqa: F401 (fixture)
from tests.kit import until

pytestmark = pytest.mark.services


async def _console(base: str) -> tuple[aiohttp.ClientSession, str]:
    session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    async with session.get(f"{base}/admin/login") as r:  # the login form's token, and its cookie
        token = re.search(r'name="csrf" value="([^"]+)"', await r.text())
    assert token, "no login token in the login page"
    form = {"username": "alice", "password": "alice-secret", "csrf": token.group(1)}
    async with session.post(f"{base}/admin/login", data=form, allow_redirects=False) as r:
        assert r.status == 303 and r.headers["Location"] == "/admin/"
    async with session.get(f"{base}/admin/api/session") as r:
        return session, (await r.json())["csrf"]


def test_gateway_console_sees_workers_metrics_and_changes_their_model(
    tmp_path,
    pg_url,
    amqp_prefix,
    procs,
    fake_model,  # noqa: F811
):
    admin = {"users": {"alice": {"password_hash": hash_password("alice-secret", n=2**8)}}}
    base, _workers = start_cluster(
        tmp_path, pg_url, amqp_prefix, procs, models=models(fake_model.url), admin=admin
    )

    async def scenario() -> None:
        assert await post(base, "p1", "u1", "hello") == ["[model-a] hello"]
        assert (await post(base, "p2", "u2", "/echo hi"))[0].startswith("hi pid=")
        session, csrf = await _console(base)
        try:
            async with session.get(f"{base}/admin/api/overview?days=1") as r:
                ov = await r.json()
            totals = ov["totals"]
            assert (totals["messages_in"], totals["model_calls"], totals["tool_calls"]) == (2, 1, 1)
            assert ov["health"]["role"] == "gateway"
            # The workers' counters, from their snapshots (written on their beat).
            workers: list[dict] = []

            async def counted() -> bool:
                nonlocal workers
                async with session.get(f"{base}/admin/api/overview?days=1") as r:
                    workers = (await r.json())["health"]["workers"]
                requests = sum(w["model_requests"] for w in workers)
                return (requests, sum(w["tool_calls"] for w in workers)) == (1, 1)

            await until(counted, 15, lambda: f"workers: {workers}", interval=0.2)
            assert len(workers) == 2 and all(w["alive"] for w in workers)
            assert {m for w in workers for m in w["models"]} == {"default"}
            assert {t for w in workers for t in w["tools"]} == {"echo"}
            # The gateway's /metrics carries them too, one `worker` label per worker.
            async with session.get(f"{base}/metrics") as r:
                text = await r.text()
            from prometheus_client.parser import text_string_to_metric_families

            names = {f.name for f in text_string_to_metric_families(text)}  # it parses
            assert {"chatfn_worker_up", "chatfn_worker_model_requests"} <= names
            lines = [x for x in text.splitlines() if x.startswith("chatfn_worker_")]
            assert sum(x.startswith("chatfn_worker_up{") and x.endswith(" 1") for x in lines) == 2
            requests = [x for x in lines if x.startswith("chatfn_worker_model_requests_total{")]
            assert len(requests) == 1 and 'model="default",outcome="ok"} 1.0' in requests[0]
            assert any('function="echo",outcome="ok"} 1.0' in x for x in lines)
            # A model chosen in the console answers the chat's next message, on a worker.
            async with session.patch(
                f"{base}/admin/api/chats/http/p1/settings",
                json={"model": "other"},
                headers={"X-CSRF-Token": csrf},
            ) as r:
                assert r.status == 200, await r.text()
            assert await post(base, "p1", "u1", "again") == ["[model-b] again"]
            assert fake_model.requests[-1] == ("model-b", "again")
        finally:
            await session.close()

    asyncio.run(scenario())
