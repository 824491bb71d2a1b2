"""The chat page's replay card (issue 40.5) in a real headless Chromium: an owner picks a model
of a local OpenAI-compatible server, presses Replay, and the chat's recorded turn appears with
both answers side by side (the recorded function result fed back, nothing sent to the chat);
an admin who is not an owner has no card. Same browser set-up as test_admin_pages.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatfn.channels.http.admin.passwords import hash_password
from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from providers.scripted import ScriptedModel, call, say
from tests.channels.http.admin_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    chromium,
    css,
    every,
    login,
    open_page,
    wait,
)
from tests.channels.http.admin_seed import PASSWORDS, TEAM, TOKEN, Console, _registry
from tests.fakes.choosing_openai import ChoosingOpenAI

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium not installed: run .ci/install-browser.sh "
    "(apt-get install chromium chromium-driver)",
)

PAGE = f"/admin/chats/http/{TEAM.replace(':', '%3A')}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    tmp: Path = tmp_path_factory.mktemp("replay")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    main = ScriptedModel([call("roll_dice", sides=20), say("main rolled 20")], name="main")

    async def start() -> tuple[ChoosingOpenAI, Bot, HttpChannel]:
        fake = await ChoosingOpenAI({"fake-a": ("roll_dice", {"sides": 6})}).start()
        hashes = {u: hash_password(PASSWORDS[u], n=2**10) for u in ("alice", "carol")}
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp / 'admin.db'}"},
                "bot": {"model": "main", "language": "en", "timezone": "UTC"},
                "models": {
                    "main": {"provider": "openai", "model": "x", "api_key": "k"},
                    "fake-a": {
                        "provider": "openai",
                        "model": "fake-a",
                        "api_key": "k",
                        "base_url": fake.url,
                    },
                },
                "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": TOKEN}},
                "admin": {
                    "users": {
                        "alice": {"password_hash": hashes["alice"], "role": "owner"},
                        "carol": {"password_hash": hashes["carol"]},
                    }
                },
            },
            base_dir=tmp,
        )
        bot = Bot(settings, registry=_registry(), model=main, load_plugins=False)
        channel = HttpChannel(bot.channel_host)
        await channel.start()
        return fake, bot, channel

    fake, bot, channel = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    console = Console(f"http://127.0.0.1:{channel.bound_port}", bot, loop, main, main, 0)
    try:
        console.post(TEAM, "@bot roll a d20", is_group=True, at_bot=True, chat_name="Team Room")
        yield console
    finally:

        async def stop() -> None:
            await channel.stop()
            await bot.aclose()
            await fake.stop()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def test_an_owner_replays_the_chat_from_its_page(site: Console, browser: Any) -> None:
    sent = len(site.run(site.bot.storage.run(site.bot.storage.recent_messages, "http", TEAM, 50)))
    login(browser, site, "alice")
    open_page(browser, site.url + PAGE)
    css(browser, '#replay-model option[value="fake-a"]').click()
    css(browser, "#replay-run").click()
    report = wait(browser).until(
        lambda d: (e := css(d, "#replay-report")).text and "fake-a says" in e.text and e
    )
    text = report.text
    assert "1 turn(s), 1 differ." in text
    assert "@bot roll a d20" in text
    assert 'roll_dice {"sides":6} (recorded)' in text  # fed the recorded result, not rolled
    assert 'roll_dice {"sides":20} (recorded)' in text  # what the bot did then
    assert "fake-a says rolled 20" in text and "main rolled 20" in text
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    # Nothing reached the chat.
    after = site.run(site.bot.storage.run(site.bot.storage.recent_messages, "http", TEAM, 50))
    assert len(after) == sent


def test_an_admin_who_is_not_an_owner_has_no_replay_card(site: Console, browser: Any) -> None:
    login(browser, site, "carol")
    open_page(browser, site.url + PAGE)
    assert css(browser, "#history")
    assert every(browser, "#replay") == []
