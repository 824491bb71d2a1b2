"""Built-in welcome: a member joining a group gets that group's configured message.

Not a function the model calls but a handler of the `member_joined` system event, which
channels produce (the console simulates one with `:join NAME`).
"""

from __future__ import annotations

from function_calls import OutgoingMessage, Plugin, PluginHost, Status, SystemEvent
from function_calls.builtins.welcome.settings import WelcomeSettings

__all__ = ["WelcomeSettings", "welcome_member", "welcome_text"]

plugin = Plugin("welcome", settings=WelcomeSettings)


def welcome_text(cfg: WelcomeSettings, event: SystemEvent) -> str | None:
    """The group's own message, else the default; `{name}` becomes the new member's name."""
    template = cfg.messages.get(event.chat_id, cfg.default)
    if not template:
        return None
    return template.replace("{name}", event.user_name or event.user_id)


@plugin.on_event("member_joined")
async def welcome_member(host: PluginHost, event: SystemEvent) -> list[OutgoingMessage]:
    if not event.is_group:
        return []
    text = welcome_text(host.section(WelcomeSettings), event)
    if text is None:
        return []
    out = OutgoingMessage(
        platform=event.platform, chat_id=event.chat_id, text=text, is_group=True, at=event.user_id
    )
    await host.send(out)
    return [out]


@plugin.status
def status(cfg: WelcomeSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "welcome.enabled is false")
    groups = f"{len(cfg.messages)} group message(s)"
    default = "a default message" if cfg.default else "no default message"
    return Status("on", f"{groups} and {default}")
