"""Built-in `chat_admin`: admins change one chat's settings from that chat (`/model`,
`/persona`, `/reset`, `/tts`, `/ambient`), see what applies there and why (`/settings`), and
what it costs (`/stats`). Written with the public plugin API only: overrides go through
`MessageContext.set_chat_override`, which stores them for that chat alone."""

from __future__ import annotations

from function_calls import Plugin, Status
from function_calls.builtins.chat_admin.functions import (
    ambient_command,
    model_command,
    persona_command,
    reset_command,
    settings_command,
    stats_command,
    tts_command,
)
from function_calls.builtins.chat_admin.settings import ChatAdminSettings
from function_calls.builtins.chat_admin.texts import TEXTS

plugin = Plugin("chat_admin", settings=ChatAdminSettings, texts=TEXTS)


@plugin.status
def status(cfg: ChatAdminSettings) -> Status:
    if not cfg.enabled:
        return Status("off", "chat_admin.enabled is false")
    return Status("on", "/model, /persona, /reset, /settings, /stats, /tts, /ambient for admins")


__all__ = [
    "ambient_command",
    "model_command",
    "persona_command",
    "plugin",
    "reset_command",
    "settings_command",
    "stats_command",
    "status",
    "tts_command",
]
