"""The test kit's own promises: `until` waits no longer than the condition needs and fails with
the caller's message; `serve` listens on the port it reports; `wait_started` names why a
server did not come up."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from tests.kit import serve, until, until_sync, wait_event


async def test_until_returns_once_the_condition_holds() -> None:
    loop = asyncio.get_running_loop()
    flag = asyncio.Event()
    loop.call_later(0.05, flag.set)
    started = time.monotonic()
    await until(flag.is_set, timeout=5)
    assert time.monotonic() - started < 1


async def test_until_awaits_an_async_predicate() -> None:
    calls: list[int] = []

    async def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    await until(third_time, timeout=5)
    assert len(calls) == 3


async def test_until_fails_with_the_message_made_at_the_deadline() -> None:
    state = {"rows": 1}
    with pytest.raises(AssertionError, match=r"rows: 1 \(not within 0.1 s\)"):
        await until(lambda: state["rows"] == 2, 0.1, lambda: f"rows: {state['rows']}")


def test_until_sync() -> None:
    deadline = time.monotonic() + 0.05
    until_sync(lambda: time.monotonic() > deadline, 5)
    with pytest.raises(AssertionError, match="never"):
        until_sync(lambda: False, 0.05, "never")


async def test_wait_event_names_what_did_not_happen() -> None:
    with pytest.raises(AssertionError, match="no reply"):
        await wait_event(asyncio.Event(), 0.05, "no reply")


async def test_serve_listens_on_the_port_it_reports() -> None:
    async def here(_request: web.Request) -> web.Response:
        return web.Response(text="here")

    app = web.Application()
    app.router.add_get("/", here)
    runner, port = await serve(app)
    try:
        assert port > 0
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/") as r:
            assert await r.text() == "here"
    finally:
        await runner.cleanup()


def test_wait_started_says_why_a_server_did_not_come_up() -> None:
    """A server that answers is waited for; one that exits is named with its log's tail at
    once; one that never answers is stopped and named after the timeout. RuntimeError each
    time: what the server fixtures turn into a skip (a failure on CI)."""
    import subprocess
    import sys

    from tests.kit.servers import wait_started

    sleeper = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])  # runs on
    try:
        calls: list[int] = []

        def third_time() -> bool:
            calls.append(1)
            return len(calls) >= 3

        wait_started(sleeper, third_time, 5, "up")
        assert len(calls) == 3

        def refused() -> bool:
            raise ConnectionRefusedError  # an OSError: not yet

        stopped: list[bool] = []
        with pytest.raises(RuntimeError, match=r"never did not answer \(not within 0.2 s\): log"):
            wait_started(
                sleeper,
                refused,
                0.2,
                "never",
                tail=lambda: "log",
                stop=lambda: stopped.append(True),
            )
        assert stopped == [True]
    finally:
        sleeper.kill()
        sleeper.wait()
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    exited.wait()
    with pytest.raises(RuntimeError, match=r"gone exited \(3\): its log"):
        wait_started(exited, lambda: False, 5, "gone", tail=lambda: "its log")
