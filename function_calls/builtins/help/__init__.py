"""Built-in `help`: what the caller may use here, built from `MessageContext.usable_functions`
(scope, admin and per-chat rules applied), so it never lists a command the user cannot run.

Written for people: a built-in's line comes from the catalogue (`help.fn.<name>`, in the chat's
language) rather than from its description, which is written for the model."""

from __future__ import annotations

from function_calls import Caller, FunctionResult, MessageContext, Plugin, tool_function
from function_calls.builtins.help.settings import HelpSettings
from function_calls.builtins.help.texts import TEXTS

plugin = Plugin("help", settings=HelpSettings, texts=TEXTS)


def offered_to_model(ctx: Caller) -> bool:
    return ctx.config.section(HelpSettings).offer_to_model


def _line(ctx: MessageContext, name: str, description: str) -> str:
    try:
        return ctx.t(f"help.fn.{name}")
    except KeyError:  # a plugin's function: its own description's first line
        return description.splitlines()[0] if description else ""


@tool_function(
    name="help",
    description="List the functions and slash commands the user can use in this chat.",
    examples=["/help", "what can you do?"],
    for_model=offered_to_model,
)
def help_function(ctx: MessageContext) -> FunctionResult:
    specs = ctx.usable_functions()
    if not specs:
        text = ctx.t("help.none")
        return FunctionResult(messages=[text], llm_content=text)
    lines = [ctx.t("help.intro" if ctx.model is not None else "help.intro_no_model")]
    for spec in specs:
        lines.append(f"• /{spec.name} — {_line(ctx, spec.name, spec.description)}")
        if spec.fields:
            lines.append("  " + ctx.t("core.usage", line=spec.usage_line))
    return FunctionResult(messages=["\n".join(lines)], llm_content="\n".join(lines))
