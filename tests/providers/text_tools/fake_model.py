"""A scripted ChatModel test double: records what it was sent, answers from a script."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from providers.base import ChatModel
from providers.errors import ToolsNotSupported
from providers.types import (
    LLMResponse,
    Message,
    ModelCapabilities,
    StreamEvent,
    ThinkingBlock,
    ToolDefinition,
)


class FakeModel(ChatModel):
    provider = "fake"

    def __init__(
        self,
        replies: list[str],
        native_tools: bool | str = False,
        refuse_tools: bool = False,
        thinking: str = "",
        system_message: bool = True,
        chunk: int = 5,
    ) -> None:
        caps = ModelCapabilities(native_tools=native_tools, system_message=system_message)  # type: ignore[arg-type]
        super().__init__("fake", "fake-1", caps)
        self.replies = list(replies)
        self.refuse_tools = refuse_tools
        self.thinking = thinking
        self.chunk = chunk
        self.sent: list[tuple[list[Message], list[ToolDefinition] | None]] = []

    def _answer(self, messages, tools) -> LLMResponse:
        self.sent.append((list(messages), list(tools) if tools else None))
        if tools and self.refuse_tools:
            raise ToolsNotSupported("tools are not supported", status=400, provider="fake")
        thinking = [ThinkingBlock(text=self.thinking, provider="fake")] if self.thinking else []
        return LLMResponse(content=self.replies.pop(0), thinking=thinking, finish_reason="stop")

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        return self._answer(messages, tools)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        response = self._answer(messages, tools)
        if self.thinking:
            yield StreamEvent(type="thinking", text=self.thinking)
        text = response.content or ""
        for i in range(0, len(text), self.chunk):
            yield StreamEvent(type="text", text=text[i : i + self.chunk])
        yield StreamEvent(type="done", response=response)
