"""The web chat page (chatfn/channels/http/static/index.html) in a real headless Chromium, against
the real
HTTP channel and bot: type a message, watch the tool call run, see the reply stream in, and
get a message the bot sends on its own through /v1/events.

Needs Debian's `chromium` and `chromium-driver` (.ci/install-browser.sh) and the `selenium`
package; skipped with the reason when either is missing.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from function_calls.context import MessageContext, OutgoingMessage
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.scripted import ScriptedModel, calls, say
from providers.types import Message, ModelCapabilities, StreamEvent, ToolDefinition

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install selenium)"
)
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium not installed: run .ci/install-browser.sh "
    "(apt-get install chromium chromium-driver)",
)

TOKEN = "web-page-token"
STREAMED = "Streaming works: this answer arrives in small pieces, one after the other."


class SlowStreamingModel(ScriptedModel):
    """A scripted model that streams its text in small, delayed chunks, so the page has
    something to show arriving."""

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        response = await self.complete(messages, tools)
        text = response.content or ""
        for i in range(0, len(text), 6):
            await asyncio.sleep(0.03)
            yield StreamEvent(type="text", text=text[i : i + 6])
        for index, tool_call in enumerate(response.tool_calls):
            yield StreamEvent(type="tool_call_start", index=index, tool_call=tool_call)
            yield StreamEvent(type="tool_call_end", index=index, tool_call=tool_call)
        yield StreamEvent(type="done", response=response)


class DiceArgs(BaseModel):
    sides: int


def _registry(shown: asyncio.Event) -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Roll a die (once the page showed it running).")
        async def roll_dice(ctx: MessageContext, args: DiceArgs) -> FunctionResult:
            async with asyncio.timeout(15):  # the browser session sets it (or has failed)
                await shown.wait()
            return FunctionResult(messages=[f"You rolled {args.sides} on a d{args.sides}."])

    return registry


@pytest.fixture
async def web_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, str, asyncio.Event]]:
    """The bot, its page's URL, and the event its dice function waits for (set by the test
    once the page shows the call running)."""
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'web.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": TOKEN}},
        },
        base_dir=tmp_path,
    )
    model = SlowStreamingModel(
        [calls(("roll_dice", {"sides": 20}), text="Let me roll that. "), say(STREAMED)],
        capabilities=ModelCapabilities(streaming=True),
    )
    shown = asyncio.Event()
    registry = _registry(shown)
    bot = Bot(settings, registry=registry, model=model, builtins=False, load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    try:
        yield bot, f"http://127.0.0.1:{channel.bound_port}/", shown
    finally:
        await channel.stop()
        await bot.aclose()


def _browser(profile: Path) -> Any:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM or ""
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1100,800",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for _policy_holds
    # An explicit driver path: Selenium Manager (which would download one) is never needed.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def _csp_lines(driver: Any) -> list[str]:
    """The browser console's lines about the Content-Security-Policy since the last call."""
    return [
        e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]
    ]


def _policy_holds(driver: Any) -> None:
    """The page did all it did under its Content-Security-Policy without breaking it (nothing
    about the policy in the console), and the policy is in force: an inline script added to
    the page does not run."""
    assert _csp_lines(driver) == []
    driver.execute_script(
        "const s = document.createElement('script');"
        "s.textContent = 'window.__inline = 1'; document.body.append(s);"
    )
    assert driver.execute_script("return window.__inline === undefined")
    assert any("inline script" in line for line in _csp_lines(driver))


def _drive(
    url: str, tmp_path: Path, loop: asyncio.AbstractEventLoop, bot: Bot, shown: asyncio.Event
) -> list[str]:
    """The browser session (blocking Selenium calls; run in a thread so the server keeps
    serving). Returns the page's bot message texts at the end."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _browser(tmp_path / "chromium-profile")
    try:
        wait = WebDriverWait(driver, 10, poll_frequency=0.02)
        driver.get(url)
        token = driver.find_element(By.ID, "token")
        token.send_keys(TOKEN, Keys.TAB)  # "change" reconnects /v1/events with ?token=
        wait.until(ec.text_to_be_present_in_element((By.ID, "live"), "live"))
        driver.find_element(By.ID, "speaker").clear()
        driver.find_element(By.ID, "speaker").send_keys("alice", Keys.TAB)
        driver.find_element(By.CSS_SELECTOR, "label:has(#mode-group)").click()
        assert driver.find_element(By.ID, "atbot").is_selected()

        box = driver.find_element(By.ID, "input")
        box.send_keys("@bot roll a d20 for me", Keys.ENTER)
        # The call shows while the function runs, then is marked done.
        running = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".tool.running")))
        assert "roll_dice" in running.text
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".tool .args"), "sides=20"))
        loop.call_soon_threadsafe(shown.set)  # seen running: the function may finish
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".tool.done")))
        wait.until(ec.text_to_be_present_in_element((By.ID, "log"), "You rolled 20 on a d20."))
        # The model's words before its call stay visible, marked as not being the reply.
        partial = driver.find_element(By.CSS_SELECTOR, ".msg.bot.partial").text
        assert "Let me roll that." in partial

        box.send_keys("and now say something long", Keys.ENTER)  # the @bot toggle is on
        # Seen while still streaming: the text grows before the reply is complete.
        partial = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, ".msg.bot.streaming .body"))
        )
        wait.until(lambda d: len(partial.text) > 0)
        assert len(partial.text) < len(STREAMED)
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".msg.bot.streaming"))
        wait.until(ec.text_to_be_present_in_element((By.ID, "log"), STREAMED))

        # A message the bot sends on its own (a reminder) reaches the open chat via /v1/events.
        asyncio.run_coroutine_threadsafe(
            bot.send(
                OutgoingMessage(
                    platform="http",
                    chat_id="group:team1",
                    text="Reminder: stand-up in 5 minutes",
                    is_group=True,
                )
            ),
            loop,
        ).result(5)
        wait.until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".msg.event"), "Reminder: stand-up")
        )
        # ... but not one to another chat.
        asyncio.run_coroutine_threadsafe(
            bot.send(OutgoingMessage(platform="http", chat_id="private:bob", text="for bob only")),
            loop,
        ).result(5)
        driver.save_screenshot(str(tmp_path / "web-chat.png"))
        _policy_holds(driver)
        return [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".msg.bot .body")]
    finally:
        driver.quit()


async def test_page_shows_tool_call_and_streamed_reply(
    web_bot: tuple[Bot, str, asyncio.Event], tmp_path: Path
) -> None:
    bot, url, shown = web_bot
    loop = asyncio.get_running_loop()
    texts = await asyncio.to_thread(_drive, url, tmp_path, loop, bot, shown)
    # Group answers @-mention the sender (bot.reply_with_mention defaults to true in groups).
    assert texts.count("@alice You rolled 20 on a d20.") == 1  # once, though /v1/events saw it
    assert texts.count(f"@alice {STREAMED}") == 1
    assert "for bob only" not in texts
    assert (tmp_path / "web-chat.png").stat().st_size > 5000
    history = bot.storage.recent_messages("http", "group:team1", 10)
    assert [(m.sender_id, m.text) for m in history if m.role == "user"] == [
        ("alice", "roll a d20 for me"),
        ("alice", "and now say something long"),
    ]


@pytest.fixture
async def vision_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, ScriptedModel, str]]:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'web.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0}},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel(
        [say("Two tiny squares.")], capabilities=ModelCapabilities(streaming=False, vision=True)
    )
    bot = Bot(settings, registry=Registry(), model=model, builtins=False, load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    try:
        yield bot, model, f"http://127.0.0.1:{channel.bound_port}/"
    finally:
        await channel.stop()
        await bot.aclose()


PASTE = """
const [b64] = arguments;
const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const data = new DataTransfer();
data.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
const box = document.getElementById("input");
box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true }));
"""


def _drive_images(url: str, tmp_path: Path) -> dict[str, str]:
    """Chinese labels (?lang=zh); one image attached with the attach button's file input, one
    pasted into the box; both sent with the question. Returns what the page showed."""
    import base64

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.fakes.images import png

    picture = tmp_path / "cat.png"
    picture.write_bytes(png())
    driver = _browser(tmp_path / "chromium-profile")
    try:
        wait = WebDriverWait(driver, 10, poll_frequency=0.02)
        driver.get(url + "?lang=zh")
        seen = {
            "lang": driver.find_element(By.TAG_NAME, "html").get_attribute("lang") or "",
            "send": driver.find_element(By.ID, "send").text,
            "attach": driver.find_element(By.ID, "attach").get_attribute("title") or "",
            "placeholder": driver.find_element(By.ID, "input").get_attribute("placeholder") or "",
            "where": driver.find_element(By.ID, "where").text,
        }
        # The attach button opens this input's file chooser; a test hands it the file.
        assert driver.execute_script("return document.getElementById('file').type") == "file"
        driver.find_element(By.ID, "file").send_keys(str(picture))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#pending img")) == 1)
        driver.execute_script(PASTE, base64.b64encode(png()).decode())
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#pending img")) == 2)
        seen["remove"] = (
            driver.find_element(By.CSS_SELECTOR, "#pending button").get_attribute("title") or ""
        )
        driver.find_element(By.ID, "input").send_keys("这是什么？", Keys.ENTER)
        wait.until(ec.text_to_be_present_in_element((By.ID, "log"), "Two tiny squares."))
        seen["shown_images"] = str(len(driver.find_elements(By.CSS_SELECTOR, ".msg.me .imgs img")))
        seen["pending_after"] = str(len(driver.find_elements(By.CSS_SELECTOR, "#pending img")))
        driver.save_screenshot(str(tmp_path / "web-images.png"))
        return seen
    finally:
        driver.quit()


async def test_page_labels_from_catalogue_and_images_by_attach_and_paste(
    vision_bot: tuple[Bot, ScriptedModel, str], tmp_path: Path
) -> None:
    from tests.fakes.images import png

    bot, model, url = vision_bot
    seen = await asyncio.to_thread(_drive_images, url, tmp_path)
    assert seen["lang"] == "zh"
    assert (seen["send"], seen["attach"], seen["remove"]) == ("发送", "添加图片", "移除")
    assert seen["placeholder"].startswith("输入消息") and "私聊" in seen["where"]
    assert (seen["shown_images"], seen["pending_after"]) == ("2", "0")
    user = [m for m in model.requests[0].messages if m.role == "user"][-1]
    assert (user.content or "").startswith("<context>Current time: ")
    assert (user.content or "").endswith("</context>\n这是什么？")
    assert [(i.mime_type, i.data) for i in user.images] == [("image/png", png())] * 2
    stored = bot.storage.recent_messages("http", "private:web-user", 5)[0].text
    assert stored.startswith("这是什么？\n[image: image/png") and "base64" not in stored


# What a model can be made to write: Markdown to render, and HTML and links that must never run.
MARKDOWN_REPLY = """Here is **bold** and `inline code`.

```python
print("hi")
```

| name | dice |
|------|------|
| ann  | d20  |

See [the docs](https://example.com/docs) or [this](javascript:window.__pwned=2).

<img src=x onerror="window.__pwned=1"> and <script>window.__pwned=3</script>"""


@pytest.fixture
async def markdown_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, str]]:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'web.db'}"},
            "plugins": {"paths": []},
            "channels": {"http": {"host": "127.0.0.1", "port": 0, "token": TOKEN}},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([say(MARKDOWN_REPLY)], capabilities=ModelCapabilities(streaming=False))
    bot = Bot(settings, registry=Registry(), model=model, builtins=False, load_plugins=False)
    channel = HttpChannel(bot.channel_host)
    await channel.start()
    try:
        yield bot, f"http://127.0.0.1:{channel.bound_port}/"
    finally:
        await channel.stop()
        await bot.aclose()


def _rendered(driver: Any) -> dict[str, Any]:
    """What the last bot reply shows, read from the page's DOM."""
    return driver.execute_script(
        """
        const md = [...document.querySelectorAll('.msg.bot .md')].pop();
        const links = [...md.querySelectorAll('a')];
        return {
          bold: md.querySelector('strong')?.textContent,
          code: md.querySelector('pre code')?.textContent,
          cells: [...md.querySelectorAll('table th, table td')].map((c) => c.textContent),
          href: links.map((a) => a.getAttribute('href')),
          target: links.map((a) => a.getAttribute('target')),
          imgs: md.querySelectorAll('img, script').length,
          text: md.textContent,
          pwned: window.__pwned ?? null,
          user: [...document.querySelectorAll('.msg.me .body')].map((b) => b.textContent),
        };
        """
    )


def _drive_history(url: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _browser(tmp_path / "chromium-profile")
    try:
        wait = WebDriverWait(driver, 10, poll_frequency=0.02)
        driver.get(url)
        driver.find_element(By.ID, "token").send_keys(TOKEN, Keys.TAB)
        wait.until(ec.text_to_be_present_in_element((By.ID, "live"), "live"))
        driver.find_element(By.ID, "input").send_keys("show me markdown", Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.bot .md table"))
        before = _rendered(driver)
        driver.refresh()  # the conversation comes back from /v1/history, rendered the same
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.bot .md table"))
        after = _rendered(driver)
        driver.save_screenshot(str(tmp_path / "web-history.png"))
        _policy_holds(driver)
        return before, after
    finally:
        driver.quit()


async def test_reload_shows_history_and_replies_render_markdown_safely(
    markdown_bot: tuple[Bot, str], tmp_path: Path
) -> None:
    _bot, url = markdown_bot
    before, after = await asyncio.to_thread(_drive_history, url, tmp_path)
    for seen in (before, after):
        assert seen["bold"] == "bold"
        assert seen["code"] == 'print("hi")\n'
        assert seen["cells"] == ["name", "dice", "ann", "d20"]
        assert seen["href"][0] == "https://example.com/docs" and seen["target"][0] == "_blank"
        assert all(not (h or "").startswith("javascript:") for h in seen["href"])
        assert seen["imgs"] == 0 and seen["pwned"] is None  # shown as text, never run
        assert '<img src=x onerror="window.__pwned=1">' in seen["text"]
        assert seen["user"] == ["show me markdown"]
