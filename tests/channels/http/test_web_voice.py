"""Issue 43, the web chat page in a real headless Chromium: the record button records the
(fake) microphone with MediaRecorder and sends it as `"audio"`; the bot transcribes it (the
local audio API decodes what the browser recorded, WebM/Opus) and answers aloud (voice.tts
auto): the page shows the reply with an audio player."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from function_calls.registry import Registry
from providers.scripted import ScriptedModel, say
from providers.types import ModelCapabilities
from tests.fakes.audio_api import FFMPEG, AudioApi

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER and FFMPEG),
    reason="needs headless Chromium (.ci/install-browser.sh) and ffmpeg",
)


def _browser(profile: Path) -> Any:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM or ""
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
        # A microphone that plays a beep, allowed without asking.
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def _record_and_send(url: str, tmp_path: Path) -> dict[str, str]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _browser(tmp_path / "chromium-profile")
    try:
        wait = WebDriverWait(driver, 20, poll_frequency=0.05)
        driver.get(url)
        record = driver.find_element(By.ID, "record")
        seen = {"title": record.get_attribute("title") or ""}
        record.click()
        # A chunk every 250 ms: six of them are a second and a half of the fake microphone.
        wait.until(
            lambda d: int(d.find_element(By.ID, "record").get_attribute("data-chunks") or 0) >= 6
        )
        record.click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "log"), "I heard you."))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.bot audio.voice"))
        player = driver.find_element(By.CSS_SELECTOR, ".msg.bot audio.voice")
        seen["reply_audio"] = (player.get_attribute("src") or "")[:40]
        mine = driver.find_elements(By.CSS_SELECTOR, ".msg.me audio.voice")
        seen["mine_audio"] = (mine[0].get_attribute("src") or "")[:20] if mine else ""
        return seen
    finally:
        driver.quit()


async def test_record_button_sends_voice_and_reply_plays(tmp_path: Path) -> None:
    async with AudioApi(transcripts=["hello from the browser"]) as api:
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'web.db'}"},
                "plugins": {"paths": []},
                "channels": {"http": {"host": "127.0.0.1", "port": 0}},
                "voice": {
                    "stt": {"base_url": api.base_url, "api_key": api.key, "model": "w"},
                    "tts": {
                        "provider": "openai",
                        "base_url": api.base_url,
                        "api_key": api.key,
                        "model": "tts-1",
                    },
                },
                "chats": [{"voice": {"tts": "auto"}}],
            },
            base_dir=tmp_path,
        )
        model = ScriptedModel(
            [say("I heard you.")], capabilities=ModelCapabilities(streaming=False)
        )
        bot = Bot(settings, registry=Registry(), model=model, builtins=False, load_plugins=False)
        channel = HttpChannel(bot.channel_host)
        await channel.start()
        try:
            url = f"http://127.0.0.1:{channel.bound_port}/"
            seen = await asyncio.to_thread(_record_and_send, url, tmp_path)
        finally:
            await channel.stop()
            await bot.aclose()
    assert seen["title"].startswith("Record a voice message")
    assert seen["mine_audio"].startswith("data:audio/webm")
    assert seen["reply_audio"].startswith("data:audio/ogg;base64,")
    [heard] = api.transcriptions
    assert heard.format == "wav" and heard.seconds >= 1.0  # the browser's WebM, converted
    assert str(model.requests[0].messages[-1].content).endswith("hello from the browser")
