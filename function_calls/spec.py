"""What a registered function is (FunctionSpec) and what running it produced (FunctionResult)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from function_calls.caller import Caller

Scope = Literal["group", "private", "both"]
Approval = Literal["chat_admin", "admin"]


class InvalidArguments(ValueError):
    """Arguments that do not match a schema-declared function's JSON schema; the message lists
    the problems ("timezone: 'x' is not of type 'string'")."""


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
    # A per-chat admin command (admin_only too): with `bot.trust_group_admins`, a group's own
    # owner and admins (IncomingMessage.sender_roles, as the platform reports them) may use it
    # in that group. Such a function acts on the chat it is called from, never another.
    chat_admin: bool = False
    # Seconds the handler may run; None: `function_calls.call_timeout`.
    timeout: float | None = None
    is_async: bool = True
    # "path/to/file.py:LINE" of the handler, for error messages and the health check.
    source: str = ""
    # Extra permission rule: `allow(ctx)` returns None when the caller may use the function,
    # else a short reason. Checked like scope/admin_only: hides the function from the model and
    # refuses the call at execution (e.g. web_search's allowed groups/users).
    allow: Callable[[Caller], str | None] | None = None
    # Whether the model is offered the function here (`for_model(ctx)`); None: always. A slash
    # command written for people (`help`) says no unless configured: its tool definition would
    # be paid for on every request and the model rarely needs it. Slash commands ignore it.
    for_model: Callable[[Caller], bool] | None = None
    # For a function declared by a JSON schema instead of an args model (an MCP server's tool):
    # checks the arguments against `parameters_schema` and returns them (a dict, handed to the
    # handler as its second argument) or raises InvalidArguments.
    validator: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # No effects (it only reads or computes): `chatfn replay` may run it again on recorded
    # turns, where a function with effects only has its recorded result fed back.
    pure: bool = False
    # Risky: a call is held until an approver answers (function_calls/approvals.py): "admin"
    # (`bot.admins`) or "chat_admin" (also the group's owner and admins, with
    # `bot.trust_group_admins`). None: runs at once.
    approval: Approval | None = None
    # Seconds a held call waits for its answer; None: `bot.approval_timeout`.
    approval_timeout: float | None = None

    @property
    def fields(self) -> list[tuple[str, bool, bool]]:
        """(name, required, is a string) of each argument, from the args model or the schema."""
        if self.args_model is not None:
            return [
                (n, f.is_required(), f.annotation is str)
                for n, f in self.args_model.model_fields.items()
            ]
        if self.validator is None:
            return []
        props = self.parameters_schema.get("properties") or {}
        required = set(self.parameters_schema.get("required") or [])
        return [
            (n, n in required, isinstance(p, dict) and p.get("type") == "string")
            for n, p in props.items()
        ]

    @property
    def single_text_field(self) -> str | None:
        """The field a `/name free text` slash command fills: the only required string field
        (or the only field, if it is a string)."""
        fields = self.fields
        required = [f for f in fields if f[1]]
        candidates = required if required else fields
        if len(candidates) != 1:
            return None
        name, _, is_str = candidates[0]
        return name if is_str else None

    @property
    def usage_line(self) -> str:
        """`/name a=… [b=…]`: the command's shape, without words of any language."""
        if not self.fields:
            return f"/{self.name}"
        parts = [f"{name}=…" if required else f"[{name}=…]" for name, required, _ in self.fields]
        return f"/{self.name} " + " ".join(parts)

    @property
    def usage(self) -> str:
        """The slash-command usage line shown to people (`/help`, a wrong command)."""
        if not self.fields:
            return f"Usage: /{self.name}"
        parts = []
        for name, required, _ in self.fields:
            parts.append(f"{name}=…" if required else f"[{name}=…]")
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
    # The function ran but reports a failure (an MCP tool's `isError`): the model gets the
    # content as an error result, and the call counts against the retry budget.
    is_error: bool = False
    # Images for the chat (`https://...` URLs or `data:image/...;base64,` URIs): sent with the
    # last of `messages`, or on their own when there are none, as the platform's image message.
    images: list[str] = field(default_factory=list)

    def replies(self) -> list[tuple[str, list[str]]]:
        """(text, images) of each message this result sends to the chat: the images go with
        the last text, or alone."""
        if not self.messages:
            return [("", list(self.images))] if self.images else []
        last = len(self.messages) - 1
        return [(m, list(self.images) if i == last else []) for i, m in enumerate(self.messages)]

    @property
    def ends_turn(self) -> bool:
        return bool(self.messages) and not self.continue_loop and not self.is_error

    def content_for_model(self) -> str:
        """What the model sees as this call's result. `llm_content` when set; else, when the
        function returned data (`metadata`), the messages and the data as compact JSON (the
        model needs the data: "done" would lose it); else the messages, or "done"."""
        if self.llm_content is not None:
            return self.llm_content
        if self.metadata:
            body: dict[str, Any] = {}
            if not self.handled:
                body["handled"] = False
            if self.messages:
                body["messages"] = self.messages
            body["metadata"] = self.metadata
            return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
        if self.messages:
            return "Sent to the user: " + "\n".join(self.messages)
        return "done" if self.handled else "not handled"
