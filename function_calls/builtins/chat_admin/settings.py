"""The `chat_admin:` section of config.yaml."""

from __future__ import annotations

from function_calls import Section


class ChatAdminSettings(Section):
    """`chat_admin:`: the per-chat admin commands (`/model`, `/persona`, `/reset`,
    `/settings`, `/stats`) for the bot's admins (and trusted group admins)."""

    # false: no /model, /persona, /reset, /settings, /stats (config rules still apply).
    enabled: bool = True
