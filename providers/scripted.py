"""A scripted model for tests, the user's own included: it answers from a list of steps and
records every request, so a test can drive the whole bot without any network.

    model = ScriptedModel([call("reminder_set", at="10:00", text="stand-up"), say("Done.")])
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from providers.base import ChatModel
from providers.errors import ProviderError
from providers.types import (
    LLMResponse,
    Message,
    ModelCapabilities,
    ToolCall,
    ToolDefinition,
    Usage,
)

Step = LLMResponse | Exception | Callable[[list[Message], list[ToolDefinition]], LLMResponse]
_ids = itertools.count(1)


def say(text: str) -> LLMResponse:
    """A step answering with plain text."""
    return LLMResponse(content=text, finish_reason="stop", usage=Usage(10, 5))


def call(name: str, arguments: dict[str, Any] | str | None = None, /, **kwargs: Any) -> LLMResponse:
    """A step calling one function with `arguments` (a dict, or a raw and possibly malformed
    JSON string) or keyword arguments."""
    return calls((name, arguments if arguments is not None else kwargs))


def calls(*items: tuple[str, dict[str, Any] | str], text: str | None = None) -> LLMResponse:
    """A step calling several functions in one round (parallel calls)."""
    tool_calls = [
        ToolCall(
            id=f"call_s{next(_ids)}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args),
        )
        for name, args in items
    ]
    return LLMResponse(
        content=text, tool_calls=tool_calls, finish_reason="tool_calls", usage=Usage(10, 5)
    )


@dataclass(slots=True)
class Request:
    messages: list[Message]
    tools: list[ToolDefinition]


class ScriptedModel(ChatModel):
    """Answers each request with the next step. A step may be a response, an exception to raise
    (e.g. ProviderUnavailable), or a function of (messages, tools). When the script runs out it
    raises, so a test that expects fewer model calls than happen fails loudly."""

    provider = "scripted"

    def __init__(
        self,
        steps: Sequence[Step] = (),
        *,
        name: str = "scripted",
        capabilities: ModelCapabilities | None = None,
        repeat_last: bool = False,
    ) -> None:
        super().__init__(name, "scripted", capabilities or ModelCapabilities(streaming=False))
        self.steps: list[Step] = list(steps)
        self.requests: list[Request] = []
        self.repeat_last = repeat_last

    def add(self, *steps: Step) -> ScriptedModel:
        self.steps.extend(steps)
        return self

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        msgs, tls = list(messages), list(tools or [])
        self.requests.append(Request(msgs, tls))
        if not self.steps:
            raise ProviderError(
                "scripted model has no step left for this request", provider="scripted"
            )
        step = self.steps[0] if (self.repeat_last and len(self.steps) == 1) else self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(msgs, tls)
        # A fresh copy per request: the loop appends the response to its history.
        return LLMResponse(
            content=step.content,
            tool_calls=[
                ToolCall(f"{c.id}_{len(self.requests)}", c.name, c.arguments, c.provider_data)
                for c in step.tool_calls
            ],
            thinking=list(step.thinking),
            finish_reason=step.finish_reason,
            usage=step.usage,
            model=step.model,
        )
