"""`channels.console:`: the terminal channel's settings."""

from __future__ import annotations

from chatfn.common.config import Section


class ConsoleSettings(Section):
    """Who you are in the terminal, and the prompt."""

    # Your sender id in the terminal (list it in `bot.admins` to be an admin there).
    user: str = "you"
    # What the console prints before each line you type.
    prompt: str = "> "
