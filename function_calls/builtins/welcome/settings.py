"""The `welcome:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field

from function_calls import Section


class WelcomeSettings(Section):
    """`welcome:`: a greeting when a member joins a group (where the platform tells the bot)."""

    # Off: nobody is greeted.
    enabled: bool = True
    # Per group chat id; `{name}` is replaced by the new member's name.
    messages: dict[str, str] = Field(default_factory=dict)
    # For groups without their own message; null: say nothing there. Unset: the catalogue's
    # greeting in the chat's language (bot.language).
    default: str | None = None
