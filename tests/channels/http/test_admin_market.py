"""The console's Plugins page in headless Chromium against a bot that really installs (issue
37.4): `chatfn run --channel http` in a fresh virtual environment (`--system-site-packages`:
the chatfn under test; what the market installs lands in the venv, never in the test's own
environment), pip reading a folder of wheels the test writes (`plugins.package_index`:
`--no-index --find-links`) and the market's index served by a local JSON server
(`plugins.index_url`, listing each wheel's sha256).

One owner, one bot, one browser, in order: the market searched; a package installed after the
confirmation (package, version, permissions, the file's hash) and used as a slash command
without a restart; a plugin file's settings changed in its form and in force for the next
message; that plugin switched off for one chat only; the package upgraded (the new code answers
the next message) and removed (its command is gone).

Needs Debian's `chromium` and `chromium-driver` (.ci/install-browser.sh) and `selenium`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from chatfn.channels.http.admin.passwords import hash_password
from tests.channels.http.admin.test_plugin_market import GREETER
from tests.channels.http.admin_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    chromium,
    css,
    every,
    open_page,
    ready,
)
from tests.channels.http.market_kit import TOKEN, Bot
from tests.chatfn.test_plugin_cli import Venv, hello
from tests.kit.ports import free_port

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium not installed: run .ci/install-browser.sh "
    "(apt-get install chromium chromium-driver)",
)

PASSWORD = "owner-secret"
PIP_WAIT = 180  # seconds a pip step (fetch, dry run, install) may take on a busy machine


def index_for(wheels: list[Path]) -> dict[str, Any]:
    versions = [
        {
            "version": wheel.name.split("-")[1],
            "chatfn": ">=0.1",
            "permissions": ["model", "network"],
            "files": [
                {"filename": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
            ],
        }
        for wheel in wheels
    ]
    hello_entry = {
        "name": "hello",
        "kind": "package",
        "distribution": "chatfn-hello",
        "summary": "Says which version it is.",
        "author": "tests",
        "homepage": "https://example.org/chatfn-hello",
        "tags": ["greeting", "example"],
        "versions": versions,
    }
    return {"format": 1, "plugins": [hello_entry]}


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bot, dict[str, str], Any]]:
    root = tmp_path_factory.mktemp("market")
    wheels = root / "wheels"
    wheels.mkdir()
    built = [hello(wheels, "1.0"), hello(wheels, "2.0")]
    served = root / "served"
    served.mkdir()
    (served / "index.json").write_text(json.dumps(index_for(built[:1])))  # 2.0: later

    def publish() -> None:
        """2.0 is released: the index lists it."""
        (served / "index.json").write_text(json.dumps(index_for(built)))

    handler = partial(SimpleHTTPRequestHandler, directory=str(served))
    index = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=index.serve_forever, daemon=True).start()
    (root / "plugins").mkdir()
    (root / "plugins" / "greeter.py").write_text(GREETER)
    config = {
        "storage": {"url": "sqlite:///bot.db"},
        "bot": {"fetch": {"allow_hosts": ["127.0.0.1"]}},
        "channels": {"http": {"token": TOKEN, "port": free_port()}},
        "plugins": {
            "paths": ["plugins"],
            "package_index": "wheels",
            # uv cannot see the chatfn this --system-site-packages venv inherits.
            "installer": "pip",
            "index_url": f"http://127.0.0.1:{index.server_address[1]}/index.json",
        },
        "admin": {
            "users": {"olive": {"password_hash": hash_password(PASSWORD, n=2**8), "role": "owner"}},
            "allow_plugin_install": True,
        },
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    venv = Venv(root / "venv", root / "config.yaml")
    bot = Bot(root, venv, config["channels"]["http"]["port"])
    hashes = {w.name.split("-")[1]: hashlib.sha256(w.read_bytes()).hexdigest() for w in built}
    try:
        yield bot, hashes, publish
    finally:
        bot.stop()
        index.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def _text(driver: Any, selector: str) -> str:
    """The element's text, looked up again when the page redrew it between find and read."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            return str(css(driver, selector).text)
        except StaleElementReferenceException:
            continue
    return str(css(driver, selector).text)


def slow(driver: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, PIP_WAIT, poll_frequency=0.2)


def note(driver: Any) -> str:
    """The page's message line (read by the page's own script: the page may be redrawn)."""
    script = "const e = document.getElementById('plugin-note'); return e ? e.textContent : '';"
    return str(driver.execute_script(script))


def _shows(driver: Any, selector: str, expected: str) -> str:
    """The element's text once it holds `expected` (the page fills a row or a detail after
    the click that asked for it): what it held last, for the assert's message, if never."""
    last = ""

    def holds(d: Any) -> bool:
        nonlocal last
        last = _text(d, selector)
        return expected in last

    try:
        slow(driver).until(holds)
    except Exception:  # TimeoutException: the assert names what was there
        pass
    return last


def plugin_row(driver: Any, name: str) -> Any:
    return css(driver, f'tr[data-plugin="{name}"]')


def confirm_install(bot: Bot, driver: Any, action: str, version: str, sha256: str) -> None:
    """Click install/upgrade in the market row, check the confirmation, say yes."""
    try:
        _confirm_install(driver, action, version, sha256)
    except Exception as exc:
        page = driver.find_element("css selector", "main#view").text
        raise AssertionError(f"{exc!r}\n--- page:\n{page}\n--- bot:\n{bot.tail()}") from exc


def _confirm_install(driver: Any, action: str, version: str, sha256: str) -> None:
    css(driver, f'tr[data-market="hello"] button[data-action="{action}"]').click()
    slow(driver).until(lambda d: not css(d, "#plugin-confirm").get_attribute("hidden"))
    assert css(driver, "#confirm-package").text == f"chatfn-hello {version}"
    assert css(driver, "#confirm-permissions").text == "model, network"
    assert css(driver, "#confirm-sha256").text == sha256
    lines = css(driver, "#confirm-lines").text
    assert f"sha256:      {sha256}" in lines and "sha256 matches" in lines
    css(driver, 'button[data-action="confirm-yes"]').click()
    slow(driver).until(lambda d: note(d))
    said = note(driver)
    assert f"chatfn-hello {version}: installed" == said, said


# The page redraws the market rows while the test reads them: each read that follows a click
# waits for what it expects (`_text` looks a redrawn element up again, `_shows` waits for its
# text). A venv, pip and Chromium, about 30 s: in the services lane .ci/run runs
# (`-m services`), and `-m browser_walk` alone.
@pytest.mark.services
@pytest.mark.browser_walk
def test_the_market_installs_configures_switches_upgrades_and_removes_from_the_browser(
    market: tuple[Bot, dict[str, str], Any], browser: Any
) -> None:
    bot, hashes, publish = market
    driver = browser
    driver.get(bot.url + "/admin/login")
    css(driver, "#username").send_keys("olive")
    css(driver, "#password").send_keys(PASSWORD)
    css(driver, "#submit").click()
    ready(driver)
    open_page(driver, bot.url + "/admin/plugins")
    assert "greet" in _shows(driver, 'tr[data-plugin="greeter"]', "greet")

    # The market: found by a tag, with its versions, hashes and permissions as details.
    css(driver, "#market-q").send_keys("greeting")
    css(driver, "#market-search button").click()
    row = css(driver, 'tr[data-market="hello"]')
    assert "Says which version it is." in row.text and "not installed" in row.text
    css(driver, 'tr[data-market="hello"] button[data-action="details"]').click()
    detail = 'tr[data-market="hello"] [data-version="1.0"]'
    assert hashes["1.0"] in _shows(driver, detail, hashes["1.0"])
    css(driver, "#market-q").clear()
    css(driver, "#market-q").send_keys("nothing like it")
    css(driver, "#market-search button").click()
    slow(driver).until(lambda d: not every(d, 'tr[data-market="hello"]'))

    # Install, after the confirmation: the plugin answers the next message, no restart.
    assert bot.say("room", "/hello_say") != ["1.0"]
    css(driver, "#market-q").clear()
    css(driver, "#market-search button").click()
    confirm_install(bot, driver, "install", "1.0", hashes["1.0"])
    assert bot.say("room", "/hello_say") == ["1.0"]  # loaded while running
    assert "1.0" in _shows(driver, 'tr[data-plugin="hello"]', "1.0")

    # 2.0 is published: the market offers the upgrade; the new code answers the next message.
    publish()
    css(driver, "#market-search button").click()
    slow(driver).until(lambda d: every(d, 'tr[data-market="hello"] [data-action="upgrade"]'))
    confirm_install(bot, driver, "upgrade", "2.0", hashes["2.0"])
    assert bot.say("room", "/hello_say") == ["2.0"]
    assert "2.0" in _shows(driver, 'tr[data-plugin="hello"]', "2.0")

    # Configure the plugin file's settings in its form: in force for the next message.
    plugin_row(driver, "greeter").find_element(
        "css selector", 'button[data-action="settings"]'
    ).click()
    css(driver, "#plugin-settings-form #ps-greeting").clear()
    css(driver, "#plugin-settings-form #ps-greeting").send_keys("ahoy")
    css(driver, "#plugin-settings-form #ps-api_key").send_keys("very-secret")
    css(driver, '#plugin-settings-form button[type="submit"]').click()
    slow(driver).until(lambda d: "new settings in force" in note(d))
    assert "set (type to replace)" in css(
        driver, "#plugin-settings-form #ps-api_key"
    ).get_attribute("placeholder")
    assert "very-secret" not in driver.page_source
    assert bot.say("room", "/greet") == ["ahoy (key)"]

    # Off for one chat only.
    bot.say("other", "/greet")
    switch = plugin_row(driver, "greeter").find_element("css selector", "[data-chat-switch]")
    switch.find_element("css selector", 'input[name="chat"]').send_keys("http:room")
    switch.find_element("css selector", 'button[data-action="chat-off"]').click()
    slow(driver).until(lambda d: "off in this chat" in note(d))
    assert "ahoy" not in " ".join(bot.say("room", "/greet"))
    assert bot.say("other", "/greet") == ["ahoy (key)"]

    # Remove: a yes in the browser's own dialog; its command is gone for the next message.
    from selenium.webdriver.support import expected_conditions

    open_page(driver, bot.url + "/admin/plugins")
    plugin_row(driver, "hello").find_element("css selector", 'button[data-action="remove"]').click()
    slow(driver).until(expected_conditions.alert_is_present()).accept()
    slow(driver).until(lambda d: "removed" in note(d))
    assert bot.say("room", "/hello_say") != ["2.0"]
