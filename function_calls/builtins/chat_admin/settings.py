"""The `chat_admin:` section of config.yaml."""

from __future__ import annotations

from function_calls import Section


class ChatAdminSettings(Section):
    # false: no /model, /persona, /reset, /settings, /stats (config rules still apply).
    enabled: bool = True
