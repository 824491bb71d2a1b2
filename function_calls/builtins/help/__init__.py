"""Built-in `help`: what the caller may use here, built from `MessageContext.usable_functions`
(scope, admin and per-chat rules applied), so it never lists a command the user cannot run."""

from __future__ import annotations

from typing import Any

from function_calls import FunctionResult, MessageContext, Plugin, tool_function
from function_calls.builtins.help.settings import HelpSettings

plugin = Plugin("help", settings=HelpSettings)


def offered_to_model(ctx: Any) -> bool:  # ctx: any caller the permission rules see
    return ctx.config.section(HelpSettings).offer_to_model


@tool_function(
    name="help",
    description="List the functions and slash commands the user can use in this chat.",
    examples=["/help", "what can you do?"],
    for_model=offered_to_model,
)
def help_function(ctx: MessageContext) -> FunctionResult:
    lines = ["You can ask me in plain words, or use these commands:"]
    for spec in ctx.usable_functions():
        first = spec.description.splitlines()[0]
        lines.append(f"• /{spec.name} — {first}")
        if spec.args_model is not None and spec.args_model.model_fields:
            lines.append(f"  {spec.usage}")
    return FunctionResult(messages=["\n".join(lines)], llm_content="\n".join(lines))
