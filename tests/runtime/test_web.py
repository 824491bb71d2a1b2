"""The process's one web server (chatfn/runtime/web.py, issue 35 section 2): the HTTP API and the
platforms' webhooks on one listener whose lifespan the runtime owns; a listener of its own for
another port; stopping lets a request in flight finish, then stops what was mounted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.runtime.web import WebServer


def _bot(tmp_path: Path) -> Bot:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'b.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0}},
        },
        base_dir=tmp_path,
    )
    return Bot(settings, builtins=False, load_plugins=False)


async def test_the_api_and_a_webhook_are_one_server_the_runtime_starts(tmp_path: Path) -> None:
    bot = _bot(tmp_path)
    seen: list[dict[str, int]] = []

    async def hook(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"ok": True})

    bot.channel_host.add_web_route("POST", "/platform/events", hook)  # a platform's factory
    http = HttpChannel(bot.channel_host)
    try:
        await bot.web.start()  # the runtime's step, once every channel is built
        port = bot.web.main.bound_port
        assert port and list(bot.web.listeners) == ["http"]
        await http.start()  # the server is up already: the channel starts none of its own
        assert http.bound_port == port
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{port}/platform/events", json={"e": 1}) as r:
                assert r.status == 200
            async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ok"
        assert seen == [{"e": 1}]
        await http.stop()
        assert bot.web.running  # the channel did not start it: the runtime stops it
    finally:
        await bot.aclose()
    assert not bot.web.running
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"http://127.0.0.1:{port}/healthz")


async def test_a_listener_of_its_own_serves_only_its_routes() -> None:
    server = WebServer(grace=1)

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ws")

    async def api(_request: web.Request) -> web.Response:
        return web.Response(text="api")

    server.main.listen("127.0.0.1", 0)
    server.mount("GET", "/v1/x", api)
    own = server.listener("onebot")
    own.listen("127.0.0.1", 0)
    own.mount("GET", "/onebot/v11/ws", ok)
    await server.start()
    try:
        main, other = server.main.bound_port, own.bound_port
        assert main and other and main != other
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{other}/onebot/v11/ws") as r:
                assert await r.text() == "ws"
            async with session.get(f"http://127.0.0.1:{other}/v1/x") as r:
                assert r.status == 404  # the API never shows on another port
            async with session.get(f"http://127.0.0.1:{main}/onebot/v11/ws") as r:
                assert r.status == 404
    finally:
        await server.stop()


async def test_stopping_finishes_requests_in_flight_then_the_lifespans_in_reverse() -> None:
    server = WebServer(grace=5)
    order: list[str] = []
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow(_request: web.Request) -> web.Response:
        entered.set()
        await release.wait()
        order.append("handler done")
        return web.Response(text="finished")

    def hooks(name: str) -> tuple[object, object]:
        async def start() -> None:
            order.append(f"start {name}")

        async def stop() -> None:
            order.append(f"stop {name}")

        return start, stop

    for name in ("mcp", "console"):
        start, stop = hooks(name)
        server.lifespan(start, stop)  # type: ignore[arg-type]
    server.main.listen("127.0.0.1", 0)
    server.mount("GET", "/slow", slow)
    await server.start()
    port = server.main.bound_port
    async with aiohttp.ClientSession() as session:
        request = asyncio.create_task(session.get(f"http://127.0.0.1:{port}/slow"))
        await asyncio.wait_for(entered.wait(), 5)
        stopping = asyncio.create_task(server.stop())
        await asyncio.sleep(0.05)
        assert not stopping.done()  # the request in flight holds the stop (within the grace)
        release.set()
        resp = await asyncio.wait_for(request, 5)
        assert resp.status == 200 and await resp.text() == "finished"
        await asyncio.wait_for(stopping, 5)
    assert order == ["start mcp", "start console", "handler done", "stop console", "stop mcp"]


async def test_onebot_is_a_listener_of_the_same_server(tmp_path: Path) -> None:
    """OneBot's WebSocket endpoint is served by the bot's web server on its own port (no
    second server): the runtime starts and stops it, and the API is not on that port."""
    from chatfn.runtime.channel_registry import find_channels

    bot = _bot(tmp_path)
    found = find_channels()
    http = found.get("http").build(bot.channel_host, None, bot.api_host)
    onebot = found.get("onebot").build(
        bot.channel_host, bot.settings.channels.onebot.model_copy(update={"port": 0})
    )
    try:
        await bot.web.start()
        assert sorted(bot.web.listeners) == ["http", "onebot"]
        await onebot.start()  # the runtime started its listener: the channel starts nothing
        await http.start()
        assert onebot.bound_port == bot.web.listeners["onebot"].bound_port
        assert onebot.bound_port != http.bound_port
        async with aiohttp.ClientSession() as session:
            ws = f"http://127.0.0.1:{onebot.bound_port}/onebot/v11/ws"
            async with session.get(ws) as r:
                assert r.status == 400  # served: a WebSocket upgrade without X-Self-ID
            async with session.get(f"http://127.0.0.1:{onebot.bound_port}/healthz") as r:
                assert r.status == 404
            async with session.get(f"http://127.0.0.1:{http.bound_port}/onebot/v11/ws") as r:
                assert r.status == 404
        await onebot.stop()
        assert bot.web.listeners["onebot"].running  # the runtime's to stop
    finally:
        await http.stop()
        await bot.aclose()
    assert not bot.web.listeners["onebot"].running


async def test_healthz_and_metrics_are_the_runtimes_and_outlive_a_restart(tmp_path: Path) -> None:
    """/healthz and /metrics are mounted by the runtime (chatfn/runtime/ops_web.py), not by the
    HTTP channel: they are served wherever the main listener listens, again after the server
    stopped and started, and are not "unbound" webhook paths when no one gives an address."""
    bot = _bot(tmp_path)
    try:
        assert bot.web.unbound() == []  # the runtime's own routes need no webhook channel
        for _ in range(2):
            bot.web.main.listen("127.0.0.1", 0)
            await bot.web.start()
            port = bot.web.main.bound_port
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    assert r.status == 200 and (await r.json())["status"] == "ok"
                async with session.get(f"http://127.0.0.1:{port}/metrics") as r:
                    assert r.status == 200 and "chatfn_" in await r.text()
            await bot.web.stop()
    finally:
        await bot.aclose()


def _bot_without_the_api(tmp_path: Path) -> Bot:
    """A bot whose channels.http section holds the web parts' settings (token, mcp, where the
    documentation keeps them) and an admin user, built without the HTTP API channel."""
    from chatfn.channels.http.admin.passwords import hash_password

    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'b.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": "s3cret", "mcp": True}},
            "admin": {"users": {"ann": {"password_hash": hash_password("long enough!", n=2**8)}}},
        },
        base_dir=tmp_path,
    )
    return Bot(settings, builtins=False, load_plugins=False)


async def test_the_bots_parts_are_mounted_by_their_owners_not_the_api_channel(
    tmp_path: Path,
) -> None:
    """/healthz, /metrics, /mcp and the admin console are parts of the bot's web server
    (chatfn/runtime/web_parts.py): with no HTTP API channel built, once the main listener has an
    address (what the HTTP channel gives it) they are served there with their documented
    settings, the token included, and the runtime's gate refuses a POST while the bot stops;
    the API's own routes are not there."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    bot = _bot_without_the_api(tmp_path)
    bearer = {"Authorization": "Bearer s3cret"}
    try:
        assert bot.web.unbound() == []  # nothing mounted before an address is given
        bot.web.main.listen("127.0.0.1", 0)
        await bot.web.start()
        base = bot.web.main.address
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ok"
            async with session.get(f"{base}/metrics") as r:
                assert r.status == 401  # channels.http.token guards it as before
            async with session.get(f"{base}/metrics", headers=bearer) as r:
                assert r.status == 200 and "chatfn_" in await r.text()
            async with session.get(f"{base}/admin/login", allow_redirects=False) as r:
                assert r.status == 200 and "text/html" in r.headers["Content-Type"]
            wrong = {"Authorization": "Bearer nope"}
            async with session.get(f"{base}/admin/api/session", headers=wrong) as r:
                assert r.status == 401  # the console's bearer is channels.http.token
            async with session.post(f"{base}/mcp", json={}) as r:
                assert r.status == 401
            async with session.post(f"{base}/v1/messages", json={}, headers=bearer) as r:
                assert r.status == 404  # the API channel's routes are its own: not built here
        async with (
            create_mcp_http_client(headers=bearer) as client,
            streamable_http_client(f"{base}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as mcp_session,
        ):
            await mcp_session.initialize()
            assert isinstance((await mcp_session.list_tools()).tools, list)
        bot.closing = True
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{base}/mcp", json={}, headers=bearer) as r:
                assert r.status == 503  # the runtime's gate, before any owner's check
    finally:
        await bot.aclose()


def test_the_http_api_channel_imports_neither_the_console_nor_mcp() -> None:
    """The HTTP API channel mounts only /v1/*, SSE and the web page: the console and /mcp
    are mounted by their owners, so its module does not import them."""
    from tests.test_layers import graph

    imported = graph()["chatfn.channels.http.channel"]
    assert not [
        m
        for m in imported
        if m.startswith(("chatfn.channels.http.admin", "chatfn.channels.mcp", "chatfn.runtime"))
        and m not in ("chatfn.runtime.channel_host", "chatfn.runtime.event_stream")
    ]
