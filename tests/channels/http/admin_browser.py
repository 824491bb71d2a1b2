"""Driving the admin console's pages in headless Chromium for test_admin_pages.py: start the
browser, wait for a page to have drawn its data, sign in, take a whole-page screenshot, make an
API request as the page's own code would."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

from tests.channels.http.admin_seed import PASSWORDS, Console

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SHOTS = os.environ.get("CHATFN_ADMIN_SCREENSHOTS")
WAIT = 10


def chromium(profile: Path) -> Any:
    """Headless Chromium through Selenium (an explicit driver path: Selenium Manager, which
    would download one, is never needed)."""
    from selenium import webdriver
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
        "--window-size=1280,900",
        "--lang=en-US",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait(driver: Any, timeout: float = WAIT) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # A page draws itself again after a change (or the browser follows a redirect): an
    # element found a moment before may be gone, so the condition is simply asked again.
    return WebDriverWait(
        driver, timeout, poll_frequency=0.02, ignored_exceptions=[StaleElementReferenceException]
    )


def css(driver: Any, selector: str) -> Any:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    def found(d: Any) -> Any:
        try:
            return d.find_element(By.CSS_SELECTOR, selector)
        except WebDriverException as exc:
            # Asked while the page navigates (a click that signs out, a redirect): Chrome
            # aborts the lookup ("aborted by navigation"); ask again on the new page.
            if "navigat" in str(exc.msg or ""):
                return False
            raise

    return wait(driver).until(found)


def every(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def open_page(driver: Any, url: str) -> Any:
    """Opens an /admin/ page and waits until it has drawn its data (or its error)."""
    driver.get(url)
    return ready(driver)


def ready(driver: Any) -> Any:
    return css(driver, "main#view[data-ready], main#view .card.error")


def view_text(driver: Any) -> str:
    return css(driver, "main#view").text


def login(driver: Any, console: Console, user: str) -> None:
    driver.delete_all_cookies()
    driver.get(console.url + "/admin/login")
    css(driver, "#username").send_keys(user)
    css(driver, "#password").send_keys(PASSWORDS[user])
    css(driver, "#submit").click()
    ready(driver)


def shot(driver: Any, name: str) -> None:
    """With CHATFN_ADMIN_SCREENSHOTS set: the whole page as <dir>/<name>.png."""
    if not SHOTS:
        return
    folder = Path(SHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    # The whole page, however tall (Chromium's own capture beyond the window), at most 2400 px.
    width, height = driver.execute_script(
        "const e = document.documentElement;"
        "return [Math.max(e.scrollWidth, window.innerWidth), e.scrollHeight]"
    )
    clip = {"x": 0, "y": 0, "width": width, "height": min(height, 2400), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path = folder / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    try:  # 256 colours are plenty for these pages and take a third of the room in the repo
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def fetch(driver: Any, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """An API request made by the page's own code (its session cookie and CSRF token)."""
    return driver.execute_async_script(
        """
        const [method, path, body, done] = arguments;
        const s = await (await fetch('/admin/api/session')).json();
        const headers = {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'};
        const data = body === null ? undefined : JSON.stringify(body);
        const r = await fetch(path, {method, headers, body: data});
        done({status: r.status, body: await r.text()});
        """,
        method,
        path,
        body,
    )


# --- the tests -----------------------------------------------------------------------------


def csp_lines(driver: Any) -> list[str]:
    """The browser console's lines about the Content-Security-Policy since the last call
    (Chromium logs each thing the policy refused)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if "Content Security Policy" in entry["message"]
    ]
