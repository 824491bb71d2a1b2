"""What every tool-call marker starts with: one of `<`, `[`, `{` or a backtick, or one of the
words `>>>`, `functools`, `Action:`. The parser scans text for this pattern and passes anything
before a match through as text, so a reply without a match holds no call. A module of its own so
a caller can rule that out without importing the parser (and json_repair: ~2 MB, ~80 ms)."""

from __future__ import annotations

import re

TRIGGER = re.compile(r"[<\[{`]|>>>|functools|Action:")


def may_hold_call(text: str) -> bool:
    """False when `text` cannot contain a tool call in any dialect the parser knows."""
    return TRIGGER.search(text) is not None
