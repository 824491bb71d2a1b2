"""`TextToolsModel`: tool calling for a model that has none, by prompt and parser.

It wraps any ChatModel. On the way in, the tool list goes into the system message and the
history's native tool turns are rewritten as text (assistant calls in the taught format, tool
results as `<tool_result>` user turns), and the inner model is called without `tools`. On the
way out, the reply is parsed (parser.py) into an LLMResponse with tool_calls, so the tool loop
above cannot tell prompt mode from native calling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from providers.base import ChatModel
from providers.text_tools.parser import StreamingToolParser
from providers.text_tools.prompt import render_tool_call, render_tool_result, render_tools_prompt
from providers.text_tools.result import ParsedText
from providers.types import (
    LLMResponse,
    Message,
    PromptFormat,
    StreamEvent,
    ThinkingBlock,
    ToolDefinition,
)


def rewrite_messages(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] | None,
    fmt: PromptFormat,
    system_message: bool = True,
) -> list[Message]:
    """History for a model without native tools (pure; see the module docstring).

    Consecutive tool results become one user turn, because several backends (llama.cpp chat
    templates, Mistral) reject two user turns in a row. A model without a system role gets the
    tools section at the top of its first user turn instead.
    """
    names_by_id: dict[str, str] = {}
    out: list[Message] = []
    last_was_result = False
    for msg in messages:
        if msg.role == "tool":
            name = msg.name or names_by_id.get(msg.tool_call_id or "", "tool")
            result = render_tool_result(name, msg.content, msg.is_error)
            if last_was_result:
                out[-1].content = f"{out[-1].content}\n{result}"
            else:
                out.append(Message(role="user", content=result))
            last_was_result = True
            continue
        last_was_result = False
        if msg.role == "assistant" and msg.tool_calls:
            for call in msg.tool_calls:
                names_by_id[call.id] = call.name
            calls = "\n".join(render_tool_call(c, fmt) for c in msg.tool_calls)
            text = f"{msg.content.rstrip()}\n{calls}" if msg.content else calls
            out.append(replace(msg, content=text, tool_calls=[]))
        else:
            out.append(replace(msg))
    if tools:
        section = render_tools_prompt(tools, fmt)
        if system_message:
            if out and out[0].role == "system":
                base = (out[0].content or "").rstrip()
                out[0] = replace(out[0], content=f"{base}\n\n{section}" if base else section)
            else:
                out.insert(0, Message(role="system", content=section))
        else:
            first_user = next((i for i, m in enumerate(out) if m.role == "user"), None)
            if first_user is None:
                out.insert(0, Message(role="user", content=section))
            else:
                m = out[first_user]
                out[first_user] = replace(m, content=f"{section}\n\n{m.content or ''}")
    return out


def _response(inner: LLMResponse | None, parsed: ParsedText) -> LLMResponse:
    """Assemble the answer: parsed text and calls, the inner model's reasoning kept as reasoning
    and `<think>` blocks found in the text added to it."""
    thinking = list(inner.thinking) if inner else []
    if parsed.thinking:
        thinking.append(ThinkingBlock(text=parsed.thinking))
    finish = inner.finish_reason if inner else None
    if parsed.calls:
        finish = "tool_calls"
    return LLMResponse(
        content=parsed.content.strip() or None,
        tool_calls=list(parsed.calls),
        thinking=thinking,
        finish_reason=finish,
        usage=inner.usage if inner else None,
        model=inner.model if inner else None,
    )


class TextToolsModel(ChatModel):
    """Prompt-mode tool calling around `inner`, in `fmt` (default: the inner model's
    configured `prompt_format`). Only the tools offered in a request can be called from it."""

    def __init__(self, inner: ChatModel, fmt: PromptFormat | None = None) -> None:
        capabilities = replace(inner.capabilities, native_tools=False)
        if fmt is not None:
            capabilities.prompt_format = fmt
        super().__init__(inner.name, inner.model, capabilities)
        self.provider = inner.provider
        self.inner = inner

    @property
    def prompt_format(self) -> PromptFormat:
        return self.capabilities.prompt_format

    def _prepare(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
    ) -> tuple[list[Message], StreamingToolParser]:
        rewritten = rewrite_messages(
            messages, tools, self.prompt_format, self.inner.capabilities.system_message
        )
        tools = tools or []
        parser = StreamingToolParser(
            [t.name for t in tools], {t.name: t.parameters for t in tools}, fmt=self.prompt_format
        )
        return rewritten, parser

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        rewritten, parser = self._prepare(messages, tools)
        response = await self.inner.complete(rewritten, None)
        parser.feed(response.content or "")
        parser.finish()
        return _response(response, parser.result())

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        rewritten, parser = self._prepare(messages, tools)
        final: LLMResponse | None = None
        async for event in self.inner.stream(rewritten, None):
            if event.type == "text":
                for out in parser.feed(event.text):
                    yield out
            elif event.type == "thinking":
                yield event
            elif event.type == "done":
                final = event.response
            # Native tool-call events cannot occur: the inner model is called without tools.
        for out in parser.finish():
            yield out
        yield StreamEvent(type="done", response=_response(final, parser.result()))

    def prepare(self) -> None:
        self.inner.prepare()

    async def aclose(self) -> None:
        await self.inner.aclose()
