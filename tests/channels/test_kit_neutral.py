"""The channel kit is platform-neutral (issue 35): no file of `chatfn/channels/kit/` names a
platform, in code, comments or docstrings. What is one platform's own lives in its package;
a kit module that needed a platform's name would be that platform's code in the wrong place."""

from __future__ import annotations

import re
from pathlib import Path

from chatfn.runtime.channel_registry import BUILTIN

KIT = Path(__file__).resolve().parents[2] / "chatfn" / "channels" / "kit"
#: The core channels are not platforms; the rest are, with the names they also go by.
CORE = {"console", "http", "mcp", "test"}
ALIASES = {"lark", "wechat", "napcat", "synapse", "ilink", "gewechat"}


def platform_names() -> set[str]:
    return ({name for name in BUILTIN if name not in CORE} | ALIASES) - {"line"}


def test_the_kit_names_no_platform() -> None:
    names = platform_names()
    assert {"telegram", "qq", "onebot", "feishu"} <= names
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    # LINE is also an English word ("one line per outage"): only its proper spelling counts.
    line = re.compile(r"\bLINE\b")
    found = [
        f"{path.name}:{number}: {text.strip()}"
        for path in sorted(KIT.glob("*.py"))
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(text) or line.search(text)
    ]
    assert not found, "the kit names a platform:\n" + "\n".join(found)
