"""The fake platforms' base (tests/channels/fake_platform.py): port 0, recording, waiting on
notify, scripted refusals and dropped connections, the check hook, and drop() on the same port."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from tests.channels.fake_platform import FakePlatform


class Echo(FakePlatform):
    def __init__(self) -> None:
        super().__init__()
        self.handled: list[str] = []

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/{tail:.*}", self._echo)

    async def _echo(self, request: web.Request) -> web.Response:
        self.handled.append(request.path)
        await self.notify()
        return web.json_response({"ok": True, "path": request.path})

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("X-Signature") == "bad":
            return web.json_response({"error": "bad signature"}, status=401)
        return None


async def test_it_listens_on_the_port_the_system_gave_and_records_each_request() -> None:
    async with Echo() as fake, aiohttp.ClientSession() as http:
        assert fake.port != 0 and fake.base == f"http://127.0.0.1:{fake.port}"
        async with http.post(f"{fake.base}/a") as resp:
            assert await resp.json() == {"ok": True, "path": "/a"}
        async with http.get(f"{fake.base}/b") as resp:
            assert resp.status == 200
        assert fake.recorded == [("POST", "/a"), ("GET", "/b")]
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as http, http.get(f"{fake.base}/a"):
            pass


async def test_wait_for_wakes_on_notify_and_times_out() -> None:
    async with Echo() as fake, aiohttp.ClientSession() as http:
        waiting = asyncio.create_task(fake.wait_for(lambda: fake.handled[:1]))
        await asyncio.sleep(0)
        assert not waiting.done()
        async with http.get(f"{fake.base}/x"):
            pass
        assert await waiting == ["/x"]
        with pytest.raises(TimeoutError):
            await fake.wait_for(lambda: "/never" in fake.handled, timeout=0.05)


async def test_a_scripted_refusal_answers_before_the_handler_then_passes() -> None:
    async with Echo() as fake, aiohttp.ClientSession() as http:
        fake.refuse_next("/send", 429, retry_after=3, body={"error": "slow down"}, count=2)
        for _ in range(2):
            async with http.post(f"{fake.base}/send") as resp:
                assert resp.status == 429 and resp.headers["Retry-After"] == "3"
                assert await resp.json() == {"error": "slow down"}
        async with http.post(f"{fake.base}/other") as resp:
            assert resp.status == 200
        async with http.post(f"{fake.base}/send") as resp:
            assert resp.status == 200
        assert fake.handled == ["/other", "/send"] and fake.scripted_answers == 2
        fake.refuse_next("/send", 503, body="down", method="GET")
        async with http.post(f"{fake.base}/send") as resp:
            assert resp.status == 200  # another method: not this refusal's
        async with http.get(f"{fake.base}/send") as resp:
            assert resp.status == 503 and await resp.text() == "down"


async def test_a_dropped_request_gets_no_answer_and_the_next_one_does() -> None:
    async with Echo() as fake, aiohttp.ClientSession() as http:
        fake.drop_next("/send")
        with pytest.raises(aiohttp.ClientConnectionError):
            async with http.post(f"{fake.base}/send"):
                pass
        async with http.post(f"{fake.base}/send") as resp:
            assert resp.status == 200
        assert fake.handled == ["/send"]


async def test_the_check_hook_refuses_before_the_handler() -> None:
    async with Echo() as fake, aiohttp.ClientSession() as http:
        async with http.get(f"{fake.base}/x", headers={"X-Signature": "bad"}) as resp:
            assert resp.status == 401 and await resp.json() == {"error": "bad signature"}
        assert fake.handled == [] and fake.recorded == [("GET", "/x")]


async def test_drop_comes_back_on_the_same_port() -> None:
    async with Echo() as fake:
        port = fake.port
        await fake.drop()
        assert fake.port == port
        async with aiohttp.ClientSession() as http, http.get(f"{fake.base}/y") as resp:
            assert resp.status == 200
