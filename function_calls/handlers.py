"""Built-in functions, written with the same public `@tool_function` API a user's plugin uses."""

from __future__ import annotations

from function_calls.commands import usage
from function_calls.context import MessageContext
from function_calls.permissions import refusal_reason
from function_calls.registry import tool_function
from function_calls.spec import FunctionResult


@tool_function(
    name="help",
    description="List the functions and slash commands the user can use in this chat.",
    examples=["/help", "what can you do?"],
)
def help_function(ctx: MessageContext) -> FunctionResult:
    specs = ctx.registry.all() if ctx.registry is not None else []
    usable = [s for s in specs if refusal_reason(s, ctx, via_command=True) is None]
    lines = ["You can ask me in plain words, or use these commands:"]
    for spec in usable:
        first = spec.description.splitlines()[0]
        lines.append(f"• /{spec.name} — {first}")
        if spec.args_model is not None and spec.args_model.model_fields:
            lines.append(f"  {usage(spec)}")
    return FunctionResult(messages=["\n".join(lines)], llm_content="\n".join(lines))
