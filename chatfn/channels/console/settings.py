"""`channels.console:`: the terminal channel's settings."""

from __future__ import annotations

from chatfn.common.config import Section


class ConsoleSettings(Section):
    """Who you are in the terminal, and the prompt."""

    user: str = "you"
    prompt: str = "> "
