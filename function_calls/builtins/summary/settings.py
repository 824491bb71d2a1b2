"""The `summary:` section of config.yaml."""

from __future__ import annotations

from pydantic import Field

from function_calls import Section


class SummarySettings(Section):
    """`summary:`: `/summary`, a model's summary of the chat's recent messages."""

    # Off: `/summary` and the summary function are not offered.
    enabled: bool = True
    # Messages summarised when the user names no count or window, and the most ever read.
    default_messages: int = Field(default=50, ge=1)
    # The most messages one summary reads, whatever the user asks.
    max_messages: int = Field(default=300, ge=1)
    # Upper bound on the transcript sent to the model (characters); long messages are cut.
    max_prompt_chars: int = Field(default=12000, ge=500)
    # Characters of one message in the transcript; a longer one is cut.
    max_message_chars: int = Field(default=400, ge=20)
