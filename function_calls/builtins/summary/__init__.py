"""Built-in `summary` (groups): what the chat talked about, from its stored history."""

from __future__ import annotations

from function_calls import Plugin, Status
from function_calls.builtins.summary.functions import summary
from function_calls.builtins.summary.settings import SummarySettings
from function_calls.builtins.summary.texts import TEXTS

__all__ = ["SummarySettings", "summary"]

plugin = Plugin("summary", settings=SummarySettings, texts=TEXTS)


@plugin.status
def status(cfg: SummarySettings) -> Status:
    if not cfg.enabled:
        return Status("off", "summary.enabled is false")
    return Status(
        "on", f"up to {cfg.max_messages} messages, prompt at most {cfg.max_prompt_chars} characters"
    )
