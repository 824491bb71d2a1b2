"""The console's Restart (issue 37 §4: a change takes effect without touching a shell): a real
`chatfn run` process, an owner's POST /admin/api/restart stops it as SIGTERM does and runs the
same command line again in the same process (same PID): the channel setting saved to
config.yaml before it is in use after it, the chat's history kept, the request audited. A
plain admin is refused; a bot not started by `chatfn run` says it cannot."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.channels.http.admin.conftest import HASHES, TOKEN, Admin, MakeConsole
from tests.kit import free_port, until

pytestmark = pytest.mark.asyncio


def config(port: int, language: str) -> str:
    return f"""\
bot:
  language: {language}
storage:
  url: sqlite:///bot.db
plugins:
  paths: []
channels:
  http:
    host: 127.0.0.1
    port: {port}
    token: tok
admin:
  users:
    alice:
      password_hash: "{HASHES["alice"]}"
      role: owner
    bob:
      password_hash: "{HASHES["bob"]}"
"""


class Running:
    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        self.log = (folder / "bot.err").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chatfn", "run", "--config", "config.yaml"]
            + ["--channel", "http"],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )

    async def health(self) -> dict[str, object] | None:
        try:
            async with (
                aiohttp.ClientSession() as s,
                s.get(f"{self.base}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r,
            ):
                return await r.json() if r.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def up(self, timeout: float = 60) -> None:
        async def answering() -> bool:
            assert self.proc.poll() is None, self.stderr()  # exited: no use waiting
            return await self.health() is not None

        why = lambda: "the bot did not answer /healthz: " + self.stderr()  # noqa: E731
        await until(answering, timeout, why, interval=0.1)  # a new HTTP session each time

    def stderr(self) -> str:
        return (self.folder / "bot.err").read_text(errors="replace")

    async def ask(self, text: str) -> list[str]:
        async with (
            aiohttp.ClientSession(headers={"Authorization": "Bearer tok"}) as s,
            s.post(
                f"{self.base}/v1/messages",
                json={"chat_id": "c1", "sender_id": "u1", "text": text},
            ) as r,
        ):
            assert r.status == 200, await r.text()
            return [reply["text"] for reply in (await r.json())["replies"]]


@pytest_asyncio.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    port = free_port()
    (tmp_path / "config.yaml").write_text(config(port, "en"))
    bot = Running(tmp_path, port)
    try:
        await bot.up()
        yield bot
    finally:
        if bot.proc.poll() is None:
            bot.proc.terminate()
            try:
                bot.proc.wait(30)
            except subprocess.TimeoutExpired:
                bot.proc.kill()
        bot.log.close()


async def test_an_owner_restarts_the_bot_in_place(running: Running) -> None:
    alice, bob = Admin(running.base), Admin(running.base)
    try:
        assert await alice.login("alice") == 303 and await bob.login("bob") == 303
        before = "\n".join(await running.ask("/help"))  # a turn stored before the restart
        assert "/help" in before and not any("\u4e00" <= ch <= "\u9fff" for ch in before)

        # A plain admin may not; nothing stops.
        status, body = await bob.send("POST", "/admin/api/restart")
        assert status == 403 and "owner" in body["error"]
        # Without the CSRF token the console's changes are refused, this one too.
        assert (await alice.send("POST", "/admin/api/restart", csrf=False))[0] == 403
        assert running.proc.poll() is None

        # A change that waits for a restart: the bot's language, saved to config.yaml.
        (running.folder / "config.yaml").write_text(config(running.port, "zh"))
        status, body = await alice.send("POST", "/admin/api/restart")
        assert status == 200 and body == {"restarting": True}
    finally:
        await alice.close()
        await bob.close()

    # Down, then up again: the same process (os.execv), with the saved setting in use.
    pid = running.proc.pid

    async def down() -> bool:
        return await running.health() is None

    await until(down, 60, "the bot did not stop to restart", interval=0.05)
    await running.up()
    assert running.proc.pid == pid and running.proc.poll() is None
    err = running.stderr()
    assert "chatfn stopped" in err and "restart asked for by alice" in err
    assert err.count("chatfn restarting") == 1

    owner = Admin(running.base)
    try:
        assert await owner.login("alice") == 303
        status, session = await owner.get("/admin/api/session")
        assert status == 200
        status, audit = await owner.get("/admin/api/audit?limit=20")
        rows = [r for r in audit["entries"] if r["action"] == "bot.restart"]
        assert len(rows) == 1 and rows[0]["user"] == "alice"
        status, chat = await owner.get("/admin/api/chats/http/c1/history")
        assert status == 200 and any(m["text"] == "/help" for m in chat["messages"])
    finally:
        await owner.close()
    after = "\n".join(await running.ask("/help"))  # the saved language is the one in use
    assert any("\u4e00" <= ch <= "\u9fff" for ch in after), after


async def test_a_bot_not_started_by_chatfn_run_says_it_cannot(console: MakeConsole) -> None:
    c = await console()
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
        async with s.post(f"{c.base}/admin/api/restart") as r:
            assert r.status == 409 and "chatfn run" in (await r.json())["error"]
    assert not c.tb.bot.restart.pending


def _browser_ready() -> bool:
    from tests.channels.http.admin_browser import CHROMEDRIVER, CHROMIUM

    try:
        import selenium.webdriver  # noqa: F401
    except ImportError:
        return False
    return bool(CHROMIUM and CHROMEDRIVER)


@pytest.mark.skipif(not _browser_ready(), reason="headless Chromium: .ci/install-browser.sh")
async def test_the_restart_button_in_a_browser(running: Running, tmp_path: Path) -> None:
    """An owner saves a channel setting on the console (the HTTP channel's `mcp`: /mcp is
    mounted only at start), the Channels page says a restart is needed and offers the button;
    pressed and confirmed, the page comes back once the bot has, the note gone and /mcp served."""
    from selenium.webdriver.common.by import By

    from tests.channels.http.admin.conftest import PASSWORDS
    from tests.channels.http.admin_browser import chromium, css, fetch, open_page, wait

    async def mcp_status() -> int:
        async with (
            aiohttp.ClientSession(headers={"Authorization": "Bearer tok"}) as s,
            s.post(f"{running.base}/mcp", json={}) as r,
        ):
            return r.status

    assert await mcp_status() == 404
    driver = await asyncio.to_thread(chromium, tmp_path / "profile")
    try:

        def walk() -> None:
            driver.get(running.base + "/admin/login")
            css(driver, "#username").send_keys("alice")
            css(driver, "#password").send_keys(PASSWORDS["alice"])
            css(driver, "#submit").click()
            css(driver, "main#view[data-ready]")
            saved = fetch(driver, "PUT", "/admin/api/channels/http", {"mcp": True})
            assert saved["status"] == 200, saved
            open_page(driver, running.base + "/admin/channels")
            css(driver, "#channels-restart button.restart").click()
            wait(driver).until(lambda d: d.switch_to.alert).accept()
            # The page reloads once the console answers again: the note is gone.
            wait(driver, 90).until(
                lambda d: (
                    d.find_elements(By.CSS_SELECTOR, "main#view[data-ready]")
                    and not d.find_elements(By.CSS_SELECTOR, "#channels-restart")
                    and d.execute_script("return performance.navigation.type") == 1
                )
            )

        await asyncio.to_thread(walk)
    finally:
        await asyncio.to_thread(driver.quit)
    assert "restart asked for by alice" in running.stderr()
    assert await mcp_status() != 404  # mounted by the restarted process
