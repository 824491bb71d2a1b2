"""Setting the bot up in the browser alone (issue 39), in headless Chromium against the real bot:
a config.yaml with no model and no console user; the first-run link the bot printed opens the
setup page, which makes the owner; the Models page adds a model pointing at a local
OpenAI-compatible server and its test shows the model's answer; the Channels page sets Telegram
up against the local Telegram Bot API and its test passes getMe; config.yaml on disk holds both
with the operator's comments kept; the bot answers through the new model.

Needs Debian's `chromium` and `chromium-driver` (.ci/install-browser.sh) and `selenium`."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.console import setup as first_run
from chatfn.runtime.settings import load_settings
from tests.channels.http.admin.fake_openai import FakeOpenAI
from tests.channels.http.admin_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    chromium,
    css,
    every,
    open_page,
    ready,
    shot,
    wait,
)

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
pytest.importorskip("telegram", reason="the telegram extra is not installed")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium not installed: run .ci/install-browser.sh",
)

TOKEN = "walk-token"
CONFIG = f"""\
# my bot, set up in the browser: this comment stays
bot:
  timezone: UTC  # where the reminders run
channels:
  http:
    host: 127.0.0.1
    port: 0
    token: {TOKEN}
"""


class Walk:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    def run(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def say(self, text: str) -> str:
        body = {"chat_id": "private:ann", "sender_id": "ann", "text": text}
        request = urllib.request.Request(
            self.url + "/v1/messages",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=20) as response:
            return str(json.loads(response.read())["replies"][0]["text"])


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    from tests.channels.telegram.telegram_fake import FakeTelegram

    (tmp_path / "config.yaml").write_text(CONFIG)
    w = Walk(tmp_path)
    w.thread.start()

    async def start() -> None:
        w.fake = await FakeOpenAI(key="sk-walk").start()
        w.tg = FakeTelegram()
        await w.tg.__aenter__()
        w.bot = Bot(load_settings(tmp_path / "config.yaml"), load_plugins=False)
        w.channel = HttpChannel(w.bot.channel_host)
        await w.channel.start()
        w.url = f"http://127.0.0.1:{w.channel.bound_port}"

    async def stop() -> None:
        await w.channel.stop()
        await w.bot.aclose()
        await w.tg.__aexit__(None, None, None)
        await w.fake.stop()

    w.run(start())
    try:
        yield w
    finally:
        w.run(stop())
        w.loop.call_soon_threadsafe(w.loop.stop)
        w.thread.join(10)


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def _fill(driver: Any, selector: str, text: str) -> None:
    box = css(driver, selector)
    box.clear()
    box.send_keys(text)


def test_the_bot_is_set_up_in_the_browser_alone(walk: Walk, browser: Any) -> None:
    # The first-run link, as the start-up line printed it: the only way in.
    token = json.loads((walk.folder / first_run.FILE).read_text())["token"]
    browser.get(walk.url + "/admin/")
    assert "setup link" in browser.find_element("css selector", "body").text
    browser.get(f"{walk.url}/admin/setup?token={token}")
    _fill(browser, "#username", "owner")
    _fill(browser, "#password", "a-long-password")
    _fill(browser, "#password2", "a-long-password")
    shot(browser, "setup")
    css(browser, "#submit").click()
    ready(browser)
    assert css(browser, "#whoami").text == "owner"

    # The Logs page opens with the last lines (the owner made a moment ago among them).
    open_page(browser, walk.url + "/admin/logs")
    wait(browser).until(lambda d: "owner owner created" in css(d, "#log-lines").text)

    # Models: one added against the local OpenAI-compatible server, tested from its row.
    open_page(browser, walk.url + "/admin/models")
    css(browser, "#model-add").click()
    _fill(browser, "#model-name", "local")
    _fill(browser, "#model-base_url", walk.fake.url)
    _fill(browser, "#model-model", "fake-1")
    _fill(browser, "#model-api_key", "sk-walk")
    _fill(browser, "#model-price_input", "0.5")
    _fill(browser, "#model-price_output", "1.5")
    css(browser, "#model-save").click()
    css(browser, '.model-test[data-model="local"]').click()
    result = '.model-test-result[data-model="local"]'
    wait(browser, 20).until(lambda d: css(d, result).get_attribute("data-ok") is not None)
    assert css(browser, result).get_attribute("data-ok") == "1"
    assert "pong:" in css(browser, result).text
    assert "default" in css(browser, 'tr[data-model="local"]').text
    shot(browser, "models")

    # Channels: Telegram set up against the local Bot API, its online test passing getMe.
    open_page(browser, walk.url + "/admin/channels")
    form = 'form[data-channel="telegram"]'
    _fill(browser, "#channel-telegram-token", walk.tg.token)
    _fill(browser, "#channel-telegram-base_url", walk.tg.base_url)
    css(browser, f"{form} .channel-save").click()
    wait(browser).until(
        lambda d: "restart" in css(d, '.channel-message[data-channel="telegram"]').text
    )
    css(browser, '.channel-test[data-channel="telegram"]').click()
    lines = '.channel-test-result[data-channel="telegram"]'
    wait(browser, 20).until(lambda d: css(d, lines).get_attribute("data-ok") is not None)
    assert css(browser, lines).get_attribute("data-ok") == "1", css(browser, lines).text
    assert "chatfn_test_bot" in css(browser, lines).text
    assert every(browser, "#channels-restart")
    shot(browser, "channels")

    # config.yaml on disk: everything written, the operator's comments kept, a backup beside it.
    text = (walk.folder / "config.yaml").read_text()
    assert "# my bot, set up in the browser: this comment stays" in text
    assert "timezone: UTC  # where the reminders run" in text
    config = yaml.safe_load(text)
    assert config["admin"]["users"]["owner"]["role"] == "owner"
    assert config["models"]["local"] == {
        "base_url": walk.fake.url,
        "model": "fake-1",
        "api_key": "sk-walk",
        "price": {"input": 0.5, "output": 1.5},
        "provider": "openai",
        "vision": False,
        "streaming": False,
    }
    assert config["channels"]["telegram"] == {"token": walk.tg.token, "base_url": walk.tg.base_url}
    assert (walk.folder / "config.yaml.bak").exists()
    assert load_settings(walk.folder / "config.yaml").chat_model_name() == "local"

    # And the bot answers through the model it was given in the browser.
    assert walk.say("hello from the browser").split() == [
        "pong:",
        "hello",
        "from",
        "the",
        "browser",
    ]


def test_every_page_text_is_in_both_catalogues(walk: Walk, browser: Any) -> None:
    """Each page of the console (the setup pages included), in English and in Chinese: no text
    it shows is missing from the catalogue (`t()` records every key it could not find)."""
    token = json.loads((walk.folder / first_run.FILE).read_text())["token"]
    browser.get(f"{walk.url}/admin/setup?token={token}")
    _fill(browser, "#username", "owner")
    _fill(browser, "#password", "a-long-password")
    _fill(browser, "#password2", "a-long-password")
    css(browser, "#submit").click()
    ready(browser)
    pages = [a.get_attribute("href") for a in every(browser, "nav#nav a")]
    assert any(p.endswith("/admin/models") for p in pages)
    assert any(p.endswith("/admin/channels") for p in pages)
    for language in ("en", "zh"):
        browser.execute_script(
            "localStorage.setItem('chatfn-admin-language', arguments[0])", language
        )
        for page in pages:
            open_page(browser, page)
            missing = browser.execute_script("return [...(window.chatfnMissingWords || [])]")
            assert missing == [], f"{page} ({language}): {missing}"
        assert browser.execute_script("return document.documentElement.lang").startswith(language)
