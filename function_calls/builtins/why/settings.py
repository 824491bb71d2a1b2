"""The `why:` section of config.yaml."""

from __future__ import annotations

from function_calls import Section


class WhySettings(Section):
    """`why:`: `/why`, what became of a message (README, "Every message's fate")."""

    # `/why`: what became of a message (its fate), for its sender and the chat's admins.
    enabled: bool = True
