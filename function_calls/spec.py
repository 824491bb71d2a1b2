"""What a registered function is (FunctionSpec) and what running it produced (FunctionResult)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

Scope = Literal["group", "private", "both"]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """Everything the router, the tool loop and the health check need to know about a function.

    Built once by `@tool_function` at import time, so mistakes surface when the bot starts, not
    when a user first triggers the function.
    """

    name: str
    description: str
    parameters_schema: dict[str, Any]
    handler: Callable[..., Any]
    args_model: type[BaseModel] | None = None
    examples: tuple[str, ...] = ()
    scope: Scope = "both"
    require_at: bool = False
    admin_only: bool = False
    # Seconds the handler may run; None: `function_calls.call_timeout`.
    timeout: float | None = None
    is_async: bool = True
    # "path/to/file.py:LINE" of the handler, for error messages and the health check.
    source: str = ""
    # Extra permission rule: `allow(ctx)` returns None when the caller may use the function,
    # else a short reason. Checked like scope/admin_only: hides the function from the model and
    # refuses the call at execution (e.g. web_search's allowed groups/users).
    allow: Callable[[Any], str | None] | None = None
    # Whether the model is offered the function here (`for_model(ctx)`); None: always. A slash
    # command written for people (`help`) says no unless configured: its tool definition would
    # be paid for on every request and the model rarely needs it. Slash commands ignore it.
    for_model: Callable[[Any], bool] | None = None

    @property
    def single_text_field(self) -> str | None:
        """The field a `/name free text` slash command fills: the only required string field
        (or the only field, if it is a string)."""
        if self.args_model is None:
            return None
        fields = self.args_model.model_fields
        required = [n for n, f in fields.items() if f.is_required()]
        candidates = required if required else list(fields)
        if len(candidates) != 1:
            return None
        name = candidates[0]
        return name if fields[name].annotation is str else None

    @property
    def usage(self) -> str:
        """The slash-command usage line shown to people (`/help`, a wrong command)."""
        if self.args_model is None:
            return f"Usage: /{self.name}"
        parts = []
        for name, f in self.args_model.model_fields.items():
            parts.append(f"{name}=…" if f.is_required() else f"[{name}=…]")
        line = f"Usage: /{self.name} " + " ".join(parts)
        if self.single_text_field:
            line += f"  (or /{self.name} <{self.single_text_field}>)"
        return line


@dataclass(slots=True)
class FunctionResult:
    """The outcome of a handler.

    `messages` go to the chat as they are and, by default, end the turn: the model is not asked to
    paraphrase a confirmation the function already wrote (and cannot claim an action it did not
    take). `llm_content` is data for the model; a result with only `llm_content` lets the tool loop
    continue so the model writes the answer. `continue_loop` asks for a further model round even
    when `messages` were sent.
    """

    handled: bool = True
    messages: list[str] = field(default_factory=list)
    # Sender id to @-mention with the messages (groups); None for no mention.
    at: str | None = None
    llm_content: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    continue_loop: bool = False

    @property
    def ends_turn(self) -> bool:
        return bool(self.messages) and not self.continue_loop

    def content_for_model(self) -> str:
        """What the model sees as this call's result."""
        if self.llm_content is not None:
            return self.llm_content
        if self.messages:
            return "Sent to the user: " + "\n".join(self.messages)
        return "done" if self.handled else "not handled"
