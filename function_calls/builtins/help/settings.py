"""The `help:` section of config.yaml."""

from __future__ import annotations

from function_calls import Section


class HelpSettings(Section):
    """`help:`: `/help`, the list of what the bot can do in this chat."""

    # Offer `help` to the model as a function. Off: `/help` is a command for people, and its
    # definition would be sent (and paid for) with every model request.
    offer_to_model: bool = False
