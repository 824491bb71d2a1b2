"""The plugin the platform approval tests load (issue 40 §2): `transfer`, a function whose every
call needs a chat admin's approval, answering `moved <amount>` once approved."""

from __future__ import annotations

import textwrap


def risky_plugin(name: str) -> str:
    """The plugin file's source, its Plugin named `name` (one per test module)."""
    return textwrap.dedent(
        f"""
        from pydantic import BaseModel
        from function_calls import FunctionResult, MessageContext, Plugin, tool_function

        plugin = Plugin({name!r})


        class Amount(BaseModel):
            amount: int


        @tool_function(description="Move money.", approval="chat_admin")
        def transfer(ctx: MessageContext, args: Amount) -> FunctionResult:
            return FunctionResult(llm_content=f"moved {{args.amount}}")
        """
    )
