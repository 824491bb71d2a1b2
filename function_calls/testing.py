"""Old import path of the test harness, kept for plugin tests written before it moved.

The harness composes a whole bot, so it lives at the top layer as `chatfn.testing`
(`from chatfn.testing import TestBot, ScriptedModel, call, say`); this module only forwards
to it, lazily, so importing the plugin API never imports the runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

_FORWARDED = frozenset({"LoopGuard", "ScriptedModel", "TestBot", "call", "say", "testbot"})


def __getattr__(name: str) -> Any:
    if name in _FORWARDED:
        return getattr(importlib.import_module("chatfn.testing"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
