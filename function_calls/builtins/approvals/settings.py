"""The `approvals:` section of config.yaml."""

from __future__ import annotations

from function_calls import Section


class ApprovalsSettings(Section):
    """`approvals:`: answering the calls of functions declared with `approval=` (README,
    "Approvals for risky calls")."""

    # `/approve ID`, `/deny ID [reason]` (and the platforms' buttons) answer the calls of
    # `@tool_function(approval=...)` functions; the console lists and answers them too.
    enabled: bool = True
