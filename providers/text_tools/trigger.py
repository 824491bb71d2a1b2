"""What every tool-call marker starts with: one of `<`, `[`, `{` or a backtick, or one of the
words `>>>`, `functools`, `Action:`. The parser scans text for this pattern and passes anything
before a match through as text, so a reply without a match holds no call. A module of its own so
a caller can rule that out without importing the parser (and json_repair: ~2 MB, ~80 ms)."""

from __future__ import annotations

import re

TRIGGER = re.compile(r"[<\[{`]|>>>|functools|Action:")


def may_hold_call(text: str) -> bool:
    """False when the parser would return `text` unchanged: no call and no markup in any
    dialect it knows. Besides the trigger, a reply that starts `all\n` (Functionary v3.2's
    header, begun by the prompt; reply_start.py) is markup without any trigger character."""
    return text.startswith("all\n") or TRIGGER.search(text) is not None
