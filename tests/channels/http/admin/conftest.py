"""A real bot with the HTTP channel and the admin console on a free port, on a SQLite file
under the test's tmp_path; `Admin` logs in over HTTP as a browser would (cookie jar, CSRF
header)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
from aiohttp import ClientSession, CookieJar
from pydantic import BaseModel

from chatfn.channels.http.admin.passwords import hash_password
from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.scripted import ScriptedModel

TOKEN = "admin-test-token"
# A cheap hash for tests (the format carries its cost; real ones use passwords.N).
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
HASHES = {name: hash_password(pw, n=2**8) for name, pw in PASSWORDS.items()}


# Currency units per million tokens: a scripted request (10 in, 5 out) costs 0.02 on main,
# 0.002 on cheap.
PRICES = {"main": {"input": 1000, "output": 2000}, "cheap": {"input": 100, "output": 200}}


class RollArgs(BaseModel):
    sides: int = 6


def make_registry() -> Registry:
    """`roll`, the function the seeded turns call."""
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Roll a die with the given number of sides.")
        async def roll(ctx: MessageContext, args: RollArgs) -> FunctionResult:
            return FunctionResult(messages=[f"rolled a d{args.sides}: {args.sides}"])

    return registry


def admin_config(**extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "models": {
            name: {"provider": "openai", "model": name, "api_key": "k", "price": price}
            for name, price in PRICES.items()
        },
        "bot": {"model": "main", "timezone": "UTC"},
        "channels": {"http": {"token": TOKEN}},
        "admin": {
            "users": {
                "alice": {"password_hash": HASHES["alice"]},
                "bob": {"password_hash": HASHES["bob"], "chats": ["http:team-*"]},
            }
        },
    }
    config.update(extra)
    return config


class Admin:
    """A browser's session with the console: cookies kept, the login page's token in the login
    form, the CSRF token sent on changes."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = ClientSession(cookie_jar=CookieJar(unsafe=True))
        self.csrf = ""

    async def login_token(self) -> str:
        """The login form's token, as the login page gives it (and its cookie with it)."""
        page = await (await self.http.get(f"{self.base}/admin/login")).text()
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found, "no login token in the login page"
        return found.group(1)

    async def login(self, user: str, password: str | None = None) -> int:
        form = {
            "username": user,
            "password": password or PASSWORDS[user],
            "csrf": await self.login_token(),
        }
        resp = await self.http.post(f"{self.base}/admin/login", data=form, allow_redirects=False)
        if resp.status == 303 and resp.headers["Location"] == "/admin/":
            self.csrf = (await self.get("/admin/api/session"))[1]["csrf"]
        return resp.status

    async def get(self, path: str) -> tuple[int, Any]:
        resp = await self.http.get(self.base + path, allow_redirects=False)
        kind = resp.headers.get("Content-Type", "")
        return resp.status, await resp.json() if "json" in kind else await resp.text()

    async def send(
        self, method: str, path: str, body: Any = None, csrf: bool = True
    ) -> tuple[int, Any]:
        headers = {"X-CSRF-Token": self.csrf} if csrf else {}
        resp = await self.http.request(
            method, self.base + path, json=body, headers=headers, allow_redirects=False
        )
        kind = resp.headers.get("Content-Type", "")
        return resp.status, await resp.json() if "json" in kind else await resp.text()

    async def close(self) -> None:
        await self.http.close()


class Console:
    """The running bot, its HTTP channel and a way to make logged-in clients."""

    def __init__(self, tb: TestBot, channel: HttpChannel) -> None:
        self.tb = tb
        self.channel = channel
        self.base = f"http://127.0.0.1:{channel.bound_port}"
        self.clients: list[Admin] = []

    async def client(self, user: str | None = None) -> Admin:
        admin = Admin(self.base)
        self.clients.append(admin)
        if user is not None:
            assert await admin.login(user) == 303
        return admin

    async def chat(self, chat_id: str, text: str, sender: str = "ann", **extra: Any) -> Any:
        """A message through the channel's own API, as any client sends one."""
        async with ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            body = {"chat_id": chat_id, "sender_id": sender, "text": text, **extra}
            resp = await http.post(f"{self.base}/v1/messages", json=body)
            assert resp.status == 200, await resp.text()
            return await resp.json()


MakeConsole = Callable[..., Any]


@pytest_asyncio.fixture
async def console(tmp_path: Path) -> AsyncIterator[MakeConsole]:
    made: list[Console] = []

    async def make(
        model: ScriptedModel | None = None, config: dict[str, Any] | None = None, **kwargs: Any
    ) -> Console:
        folder = tmp_path / f"bot{len(made)}"
        folder.mkdir()
        kwargs.setdefault("registry", make_registry())
        kwargs.setdefault("builtins", False)
        if model is None:
            model = ScriptedModel([], name="main")
        tb = TestBot(folder, model=model, config=config or admin_config(), **kwargs)
        channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
        await channel.start()
        made.append(Console(tb, channel))
        return made[-1]

    yield make
    for c in reversed(made):
        for client in c.clients:
            await client.close()
        await c.channel.stop()
        await c.tb.aclose()
