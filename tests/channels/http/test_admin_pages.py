"""The admin console's pages (chatfn/channels/http/admin/static/) in a real headless Chromium,
against
the real bot: the HTTP channel with `admin.users`, a SQLite database seeded by real traffic
(tests/channels/http/admin_seed.py).

One bot and one browser serve the whole module. Checked: login; each page shows the seeded
data; a model chosen and a reset made on a chat's page apply to the next message in that chat;
a scoped user sees and changes only their chats; every /admin/ path without a session is
refused; sign-out; zh/en switching; every page at phone width.

`CHATFN_ADMIN_SCREENSHOTS=docs/admin` also saves each page as PNG (desktop, zh and phone
width), with a week of traffic behind the charts: that is how the README's screenshots are made.

Needs Debian's `chromium` and `chromium-driver` (.ci/install-browser.sh) and `selenium`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.channels.http.admin_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    SHOTS,
    chromium,
    csp_lines,
    css,
    every,
    fetch,
    login,
    open_page,
    ready,
    shot,
    view_text,
    wait,
)
from tests.channels.http.admin_seed import BOB, HOSTILE, MALLORY, TEAM, Console, running_console

pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium not installed: run .ci/install-browser.sh "
    "(apt-get install chromium chromium-driver)",
)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with running_console(tmp_path_factory.mktemp("admin"), week=bool(SHOTS)) as seeded:
        yield seeded


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


ADMIN_PAGES = [
    "/admin/",
    "/admin/chats",
    "/admin/usage",
    "/admin/reminders",
    "/admin/delivery",
    "/admin/plugins",
    "/admin/logs",
    "/admin/check",
    "/admin/audit",
    f"/admin/chats/http/{TEAM.replace(':', '%3A')}",
]
API = [
    "/admin/api/session",
    "/admin/api/overview",
    "/admin/api/chats",
    "/admin/api/usage",
    "/admin/api/reminders",
    "/admin/api/delivery",
    "/admin/api/plugins",
    "/admin/api/audit",
    "/admin/api/logs",
    f"/admin/api/chats/http/{TEAM.replace(':', '%3A')}/history",
]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


def _status(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, str]:
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(
        url, method=method, data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with opener.open(request, timeout=5) as response:
            return response.status, response.headers.get("Location", "")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", "")


def test_every_admin_path_without_a_session_is_refused(console: Console, browser: Any) -> None:
    for path in ADMIN_PAGES:
        assert _status(console.url + path) == (303, "/admin/login"), path
    for path in API:
        assert _status(console.url + path)[0] == 401, path
    chat = f"/admin/api/chats/http/{TEAM.replace(':', '%3A')}"
    for method, path in [
        ("PATCH", f"{chat}/settings"),
        ("POST", f"{chat}/reset"),
        ("POST", "/admin/api/check"),
        ("DELETE", "/admin/api/reminders/x"),
        ("POST", f"/admin/api/delivery/{console.expired_event}/retry"),
    ]:
        assert _status(console.url + path, method, b'{"model": "cheap"}')[0] == 401, path
    # The static files hold no data and are served to anyone (the login page needs them).
    assert _status(console.url + "/admin/static/js/app.js")[0] == 200
    # A browser without a session is sent to the login page, which a wrong password refuses.
    browser.delete_all_cookies()
    browser.get(console.url + "/admin/usage")
    css(browser, "form#login")
    assert browser.current_url.endswith("/admin/login")
    css(browser, "#username").send_keys("alice")
    css(browser, "#password").send_keys("wrong")
    css(browser, "#submit").click()
    wait(browser).until(lambda d: css(d, "#error").is_displayed())
    assert "Wrong user name or password" in css(browser, "#error").text
    shot(browser, "login")


def test_pages_show_the_seeded_database(console: Console, browser: Any) -> None:
    console.needs(*API[1:9])
    login(browser, console, "alice")
    assert css(browser, "#whoami").text == "alice"
    # Config check, run from its page in a second tab: it runs `chatfn check` in a process of
    # its own (seconds on a busy machine), so the other pages are looked at meanwhile.
    pages = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_page(browser, console.url + "/admin/check")
    css(browser, "#run-check").click()
    check = browser.current_window_handle
    browser.switch_to.window(pages)

    # Overview: totals from the seeded traffic, a chart per series, the health panel.
    open_page(browser, console.url + "/admin/?days=7")
    stat = lambda key: css(browser, f'[data-stat="{key}"] .value').text.replace(",", "")  # noqa: E731
    assert int(stat("messages_in")) >= 5
    assert int(stat("model_calls")) >= 5
    assert stat("cost") not in ("—", "0.0000")
    wait(browser).until(lambda d: len(every(d, ".chart canvas")) == 6)
    assert "http" in css(browser, "#health").text
    # The MCP built-in's list (its console view's `health`), drawn with its words: none here.
    assert "MCP servers" in css(browser, "#health").text
    assert css(browser, "#outbox-pending").text == "1"
    shot(browser, "overview")

    # Chats: every seeded chat; a hostile chat name is text, never markup.
    open_page(browser, console.url + "/admin/chats")
    rows = {r.get_attribute("data-chat"): r.text for r in every(browser, "tr[data-chat]")}
    assert {f"http:{TEAM}", f"http:{BOB}", f"http:{MALLORY}"} <= set(rows)
    assert "Team Room" in rows[f"http:{TEAM}"]  # the reminder's chat name (`@plugin.chat_names`)
    assert HOSTILE in rows[f"http:{MALLORY}"]
    assert browser.execute_script("return window.__pwned") is None
    css(browser, '#chat-filters select[name="kind"] option[value="private"]').click()
    wait(browser).until(lambda d: "kind=private" in d.current_url)
    ready(browser)
    private = {r.get_attribute("data-chat") for r in every(browser, "tr[data-chat]")}
    assert private == {f"http:{BOB}", f"http:{MALLORY}"}
    open_page(browser, console.url + "/admin/chats")
    shot(browser, "chats")

    # A chat: settings with their sources, the history with the tool call and the notice.
    css(browser, f'tr[data-chat="http:{TEAM}"] a.chat-link').click()
    css(browser, "#settings-form")
    assert (
        css(browser, '[data-source="model"]').text.endswith("default")
        or "bot.model" in css(browser, '[data-source="model"]').text
    )
    history = css(browser, "#history").text
    assert "@bot roll a d20" in history and "main: rolled 20" in history
    assert every(browser, '#history [data-function="roll_dice"]')
    assert "stand-up" in history  # the reminder command's answer
    shot(browser, "chat")

    # Each incoming message's fate beside it, and the history filtered by fate (issue 40).
    assert every(browser, '#history [data-fate="answered"]')
    choose = "const s = document.querySelector('#fate-filter'); s.value = arguments[0];"
    choose += "s.dispatchEvent(new Event('change'));"
    browser.execute_script(choose, "function")
    wait(browser).until(lambda d: not every(d, '#history [data-fate="answered"]'))
    assert every(browser, '#history [data-fate="function"]')  # the reminder command
    browser.execute_script(choose, "")
    wait(browser).until(lambda d: every(d, '#history [data-fate="answered"]'))

    # Turn trace of the rolled message: two model requests (tool call, then answer).
    css(browser, "a.trace-link").click()
    css(browser, "#model-requests")
    wait(browser).until(lambda d: len(every(d, "#model-requests tbody tr")) == 2)
    requests = css(browser, "#model-requests").text
    assert "tool_calls" in requests and "stop" in requests and "main" in requests
    assert "roll_dice" in css(browser, "#tool-calls").text
    assert "rolled 20" in css(browser, "#tool-calls").text
    shot(browser, "turn")

    # Usage by model: the main model's tokens and cost, top chats, the CSV link.
    open_page(browser, console.url + "/admin/usage?group_by=model&days=7")
    assert every(browser, 'tr[data-key="main"]')
    assert css(browser, "#usage-cost").text != "—"
    assert f"http:{TEAM}" in css(browser, "#top-chats").text
    csv = css(browser, "#csv-export").get_attribute("href")
    assert "format=csv" in csv and "group_by=model" in csv
    css(browser, '#group-by option[value="chat"]').click()
    wait(browser).until(lambda d: every(d, f'tr[data-key="http:{TEAM}"]'))
    shot(browser, "usage")

    # Delivery: the two telegram rows; "retry now" puts the expired one back to pending.
    open_page(browser, console.url + "/admin/delivery")
    row = css(browser, f'tr[data-event="{console.expired_event}"]')
    assert "expired" in row.text and "owed one" in row.text
    shot(browser, "delivery")
    row.find_element("css selector", "button.retry").click()
    wait(browser).until(
        lambda d: "pending" in css(d, f'tr[data-event="{console.expired_event}"] .state').text
    )
    assert "pending" in css(browser, "#delivery-notice").text

    # Plugins: the built-in reminders plugin and its status line.
    open_page(browser, console.url + "/admin/plugins")
    reminders = css(browser, '[data-plugin="reminders"]')
    assert "reminder_set" in reminders.text
    # Built-ins are switched off like any plugin (a toggle), but help, which is always on.
    assert reminders.find_elements("css selector", 'button[data-action="toggle"]')
    help_row = css(browser, '[data-plugin="help"]')
    assert not help_row.find_elements("css selector", 'button[data-action="toggle"]')
    assert "MCP servers" in css(browser, "#mcp-list").text  # the MCP built-in's list, empty
    # A third-party plugin's metadata (tests/fixtures/plugins/tone.py).
    tone = css(browser, '[data-plugin="tone"]')
    about = tone.find_element("css selector", ".plugin-about")
    assert "Greets in each chat's own tone." in about.text
    assert "The chatfn tests" in about.text and "chatfn any" in about.text
    link = about.find_element("css selector", "a")
    assert link.get_attribute("href") == "https://example.org/tone"
    shot(browser, "plugins")

    # Logs: the live tail shows a line of a message sent now.
    open_page(browser, console.url + "/admin/logs")
    wait(browser).until(lambda d: "live" in css(d, "#log-status").text)
    console.post(BOB, "roll one for the log", sender="bob")  # the call is logged at INFO
    wait(browser).until(lambda d: every(d, "#log-lines .log-line"))
    shot(browser, "logs")

    # Reminders last: cancelling one removes it from the active list.
    open_page(browser, console.url + "/admin/reminders")
    reminder = css(browser, "tr[data-reminder]")
    assert "stand-up" in reminder.text and "Team Room" in reminder.text
    shot(browser, "reminders")
    reminder.find_element("css selector", "button.cancel-reminder").click()
    browser.switch_to.alert.accept()
    wait(browser).until(lambda d: not every(d, "tr[data-reminder]"))

    # The config check's report, back in its tab.
    browser.switch_to.window(check)
    wait(browser, 60).until(lambda d: every(d, "#check-result .check-line, #check-result .error"))
    assert every(browser, '#check-result [data-status="ok"]'), css(browser, "#check-result").text
    assert css(browser, "#check-verdict").text
    shot(browser, "check")
    browser.close()
    browser.switch_to.window(pages)

    # Audit: the changes made above, by alice.
    open_page(browser, console.url + "/admin/audit")
    audit = view_text(browser)
    assert "delivery.retry" in audit and "reminder.cancel" in audit and "check" in audit
    assert "alice" in audit
    shot(browser, "audit")
    # No page threw or failed a request on the way.
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_a_model_chosen_and_a_reset_in_the_page_apply_to_the_next_message(
    console: Console, browser: Any
) -> None:
    console.needs(f"/admin/api/chats/http/{TEAM.replace(':', '%3A')}")
    login(browser, console, "alice")
    open_page(browser, console.url + f"/admin/chats/http/{TEAM.replace(':', '%3A')}")
    assert css(browser, "#chat-title").text == "Team Room"  # the name its reminder was set with
    css(browser, '#set-model option[value="cheap"]').click()
    css(browser, "#save-settings").click()
    wait(browser).until(lambda d: "admin:alice" in css(d, '[data-source="model"]').text)
    assert "Saved" in css(browser, "#chat-notice").text

    # Reset context from the page too: the next request no longer carries the earlier turns.
    css(browser, "#reset-context").click()
    browser.switch_to.alert.accept()
    wait(browser).until(lambda d: "reset" in css(d, "#chat-notice").text.lower())

    cheap_before, main_before = len(console.cheap.requests), len(console.main.requests)
    reply = console.post(TEAM, "@bot who answers now?", is_group=True, at_bot=True)
    assert "cheap answers" in json.dumps(reply)
    assert len(console.cheap.requests) == cheap_before + 1
    assert len(console.main.requests) == main_before
    seen = " ".join(str(m.content) for m in console.cheap.requests[-1].messages)
    assert "who answers now?" in seen and "roll a d20" not in seen
    assert "main answers" in json.dumps(console.post(BOB, "and here?", sender="bob"))  # only TEAM

    # "use config" returns the key to the config: the main model answers again.
    open_page(browser, console.url + f"/admin/chats/http/{TEAM.replace(':', '%3A')}")
    css(browser, 'input[name="model-config"]').click()
    css(browser, "#save-settings").click()
    wait(browser).until(lambda d: "admin:alice" not in css(d, '[data-source="model"]').text)
    assert "main answers" in json.dumps(
        console.post(TEAM, "@bot and now?", is_group=True, at_bot=True)
    )


def test_a_plugins_per_chat_key_is_a_field_of_the_chats_form(
    console: Console, browser: Any
) -> None:
    """tests/fixtures/plugins/tone.py declares `tone` (a choice, overridable) and nothing else:
    the chat's form shows it, and a value saved there is the chat's override."""
    page = console.url + f"/admin/chats/http/{TEAM.replace(':', '%3A')}"
    state = console.bot.storage.chat_state

    def override() -> Any:
        found = console.run(console.bot.storage.run(state.overrides, "http", TEAM))
        return found["tone"].value if "tone" in found else None

    login(browser, console, "alice")
    open_page(browser, page)
    assert "default" in css(browser, '[data-source="tone"]').text
    css(browser, '#set-tone option[value="pirate"]').click()
    css(browser, "#save-settings").click()
    wait(browser).until(lambda d: "admin:alice" in css(d, '[data-source="tone"]').text)
    assert override() == "pirate"
    open_page(browser, page)
    css(browser, 'input[name="tone-config"]').click()
    css(browser, "#save-settings").click()
    wait(browser).until(lambda d: "admin:alice" not in css(d, '[data-source="tone"]').text)
    assert override() is None


def test_a_scoped_user_sees_and_changes_only_their_chats(console: Console, browser: Any) -> None:
    console.needs("/admin/api/chats", "/admin/api/plugins")
    login(browser, console, "carol")
    assert "carol" in css(browser, "#whoami").text
    open_page(browser, console.url + "/admin/chats")
    assert [r.get_attribute("data-chat") for r in every(browser, "tr[data-chat]")] == [
        f"http:{TEAM}"
    ]
    open_page(browser, console.url + f"/admin/chats/http/{BOB.replace(':', '%3A')}")
    assert "Not found" in css(browser, "main#view .card.error").text
    open_page(browser, console.url + "/admin/plugins")
    assert "unscoped" in css(browser, "main#view .card.error").text
    bob = f"/admin/api/chats/http/{BOB.replace(':', '%3A')}"
    assert fetch(browser, "PATCH", f"{bob}/settings", {"model": "cheap"})["status"] == 404
    assert fetch(browser, "POST", f"{bob}/reset")["status"] == 404
    assert fetch(browser, "GET", f"{bob}/history")["status"] == 404
    assert fetch(browser, "POST", "/admin/api/check", {})["status"] == 403
    # Their own chat they may change.
    team = f"/admin/api/chats/http/{TEAM.replace(':', '%3A')}/settings"
    assert fetch(browser, "PATCH", team, {"language": "zh"})["status"] == 200
    assert fetch(browser, "PATCH", team, {"language": None})["status"] == 200
    # Signing out (a POST with the CSRF token) ends the session: the pages are refused again.
    open_page(browser, console.url + "/admin/chats")
    css(browser, "#logout").click()
    css(browser, "form#login")
    browser.get(console.url + "/admin/chats")
    css(browser, "form#login")
    assert browser.current_url.endswith("/admin/login")


def test_language_switch_is_remembered_and_phone_width_works(
    console: Console, browser: Any
) -> None:
    console.needs("/admin/api/overview", "/admin/api/chats")
    login(browser, console, "alice")
    open_page(browser, console.url + "/admin/")
    css(browser, '#language option[value="zh"]').click()
    wait(browser).until(lambda d: css(d, 'nav a[data-page="overview"]').text == "概览")
    ready(browser)
    shot(browser, "overview-zh")
    open_page(browser, console.url + "/admin/chats")
    assert css(browser, 'nav a[data-page="chats"]').text == "会话"
    css(browser, '#language option[value="en"]').click()
    wait(browser).until(lambda d: css(d, 'nav a[data-page="chats"]').text == "Chats")

    browser.set_window_size(390, 844)
    try:
        for path in ADMIN_PAGES:
            open_page(browser, console.url + path)
            wide = browser.execute_script("return document.documentElement.scrollWidth")
            assert wide <= 390, f"{path} is {wide} px wide at phone width"
        assert not css(browser, "nav#nav").is_displayed()
        css(browser, "#menu").click()
        assert css(browser, "nav#nav").is_displayed()
        css(browser, "#menu").click()
        open_page(browser, console.url + "/admin/")
        shot(browser, "overview-phone")
    finally:
        browser.set_window_size(1280, 900)


def test_every_page_works_under_its_content_security_policy(console: Console, browser: Any) -> None:
    """The pages load only script files of their origin (`script-src 'self'`): signing in
    and every page draw their data with nothing refused by the policy, and the policy is in
    force (an inline script added to a page does not run)."""
    console.needs(*API[1:9])
    csp_lines(browser)  # what earlier tests left in the log
    login(browser, console, "alice")
    for path in ADMIN_PAGES:
        open_page(browser, console.url + path)
    assert csp_lines(browser) == []
    browser.execute_script(
        "const s = document.createElement('script');"
        "s.textContent = 'window.__inline = 1'; document.body.append(s);"
    )
    assert browser.execute_script("return window.__inline === undefined")
    assert any("inline script" in line for line in csp_lines(browser))
