"""The admin console's static files (chatfn/channels/http/admin/static/) without a browser: the zh
and
en catalogues hold the same words and every word the pages use; no script writes HTML (data
from the bot, chat names and messages above all, only ever becomes text); every vendored file
is the one its README names, beside its licence; the pages load nothing from another host."""

from __future__ import annotations

import json
import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[3] / "chatfn/channels/http/admin/static"


def test_catalogues_have_every_word_the_pages_use() -> None:
    static = STATIC
    en = json.loads((static / "i18n/en.json").read_text("utf-8"))
    zh = json.loads((static / "i18n/zh.json").read_text("utf-8"))
    assert set(en) == set(zh)
    used = set()
    for script in (static / "js").rglob("*.js"):
        used |= set(re.findall(r'\bt\("([a-z_.]+)"', script.read_text("utf-8")))
    for page in ("login.html", "setup.html"):
        used |= set(re.findall(r'data-i18n="([a-z_.]+)"', (static / page).read_text("utf-8")))
    # The first run's error lines, named in setup.js's table.
    used |= set(re.findall(r'"(setup\.[a-z_]+)"', (static / "js/setup.js").read_text("utf-8")))
    assert used - set(en) == set()

    # Data only ever reaches the page as text: no script assigns HTML.
    for script in (static / "js").rglob("*.js"):
        code = script.read_text("utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
            assert sink not in code, f"{script.name} uses {sink}"


def test_vendored_files_are_listed_with_their_licence() -> None:
    readme = (STATIC / "vendor/README.md").read_text("utf-8")
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"):
        assert (STATIC / "vendor" / name).is_file(), name
        assert name in readme
    assert "MIT License" in (STATIC / "vendor/uPlot.LICENSE").read_text("utf-8")
    assert (
        "1.6.32" in readme
        and "(v1.6.32)" in (STATIC / "vendor/uPlot.iife.min.js").read_text("utf-8")[:300]
    )


def test_pages_load_nothing_from_another_host() -> None:
    for page in [
        *STATIC.glob("*.html"),
        *(STATIC / "js").rglob("*.js"),
        *(STATIC / "css").glob("*.css"),
    ]:
        text = page.read_text("utf-8")
        for match in re.findall(r'(?:src|href)=["\']([^"\']+)', text) + re.findall(
            r'import\(?\s*["\']([^"\']+)', text
        ):
            assert match.startswith(("/admin/", "./", "../", "data:")), f"{page.name}: {match}"
