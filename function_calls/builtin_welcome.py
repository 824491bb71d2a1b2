"""Built-in welcome: a member joining a group gets that group's configured message.

Not a function the model calls but a subscriber to the `member_joined` system event, which
channels produce (the console simulates one with `:join NAME`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from function_calls.context import OutgoingMessage, SystemEvent
from runtime.settings import Settings

if TYPE_CHECKING:
    from runtime.bot import Bot

FEATURE = "welcome"


def welcome_text(settings: Settings, event: SystemEvent) -> str | None:
    """The group's own message, else the default; `{name}` becomes the new member's name."""
    cfg = settings.welcome
    template = cfg.messages.get(event.chat_id, cfg.default)
    if not template:
        return None
    return template.replace("{name}", event.user_name or event.user_id)


async def welcome_member(bot: Bot, event: SystemEvent) -> list[OutgoingMessage]:
    if not event.is_group:
        return []
    text = welcome_text(bot.settings, event)
    if text is None:
        return []
    out = OutgoingMessage(
        platform=event.platform, chat_id=event.chat_id, text=text, is_group=True, at=event.user_id
    )
    await bot.send(out)
    return [out]


def status(settings: Settings) -> tuple[str, str, str]:
    cfg = settings.welcome
    if not cfg.enabled:
        return FEATURE, "off", "welcome.enabled is false"
    groups = f"{len(cfg.messages)} group message(s)"
    default = "a default message" if cfg.default else "no default message"
    return FEATURE, "on", f"{groups} and {default}"


def setup(bot: Bot) -> None:
    bot.on_event("member_joined", welcome_member)
