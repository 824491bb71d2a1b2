"""The `summary:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field

from function_calls import Section


class SummarySettings(Section):
    enabled: bool = True
    # Messages summarised when the user names no count or window, and the most ever read.
    default_messages: int = Field(default=50, ge=1)
    max_messages: int = Field(default=300, ge=1)
    # Upper bound on the transcript sent to the model (characters); long messages are cut.
    max_prompt_chars: int = Field(default=12000, ge=500)
    max_message_chars: int = Field(default=400, ge=20)
