"""Built-in welcome: a member joining a group gets that group's configured message.

Not a function the model calls but a handler of the `member_joined` system event, which
channels produce (the console simulates one with `:join NAME`).
"""

from __future__ import annotations

from function_calls import (
    OutgoingMessage,
    Plugin,
    PluginHost,
    Status,
    SystemEvent,
    translate,
)
from function_calls.builtins.welcome.settings import WelcomeSettings
from function_calls.builtins.welcome.texts import TEXTS

__all__ = ["WelcomeSettings", "welcome_member", "welcome_text"]

plugin = Plugin("welcome", settings=WelcomeSettings, texts=TEXTS)


def welcome_text(cfg: WelcomeSettings, event: SystemEvent, language: str = "en") -> str | None:
    """The group's own message, else the default (the catalogue's greeting in the chat's
    language unless `welcome.default` is set; null: nothing); `{name}` is the member's name."""
    default = (
        cfg.default
        if "default" in cfg.model_fields_set
        else translate(language, "welcome.default", name="{name}")
    )
    template = cfg.messages.get(event.chat_id, default)
    if not template:
        return None
    return template.replace("{name}", event.user_name or event.user_id)


@plugin.on_event("member_joined")
async def welcome_member(host: PluginHost, event: SystemEvent) -> list[OutgoingMessage]:
    if not event.is_group:
        return []
    language = host.language_of(event.platform, event.chat_id, event.is_group)
    text = welcome_text(host.section(WelcomeSettings), event, language)
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
    has_default = cfg.default or "default" not in cfg.model_fields_set
    default = "a default message" if has_default else "no default message"
    return Status("on", f"{groups} and {default}")
