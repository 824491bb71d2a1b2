"""`AutoToolsModel`: native tools until the endpoint says it has none, then prompt mode.

For models configured `native_tools: auto` (OpenAI-compatible endpoints whose tool support is
unknown). The decision rests only on `ToolsNotSupported`, which adapters raise for a documented
list of error patterns; a model configured `native_tools: true` cannot be wrapped (the
constructor refuses), so a misread error can never silently switch it to prompt mode.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from loguru import logger

from providers.base import ChatModel
from providers.errors import ToolsNotSupported
from providers.text_tools.model import TextToolsModel
from providers.types import LLMResponse, Message, StreamEvent, ToolDefinition


class AutoToolsModel(ChatModel):
    """Send tools natively; on ToolsNotSupported switch to TextToolsModel for the life of this
    object (the factory builds one per configured model, so: the process) and retry the same
    request in prompt mode. `downgraded` is for the health check."""

    def __init__(self, inner: ChatModel) -> None:
        mode = inner.capabilities.native_tools
        if not (isinstance(mode, str) and mode == "auto"):
            raise ValueError(
                f"model {inner.name!r} has native_tools={mode!r}; only 'auto' may be downgraded"
            )
        super().__init__(inner.name, inner.model, inner.capabilities)
        self.provider = inner.provider
        self.inner = inner
        self.text_model = TextToolsModel(inner)
        self._downgraded = False
        self.downgrade_reason: str | None = None

    @property
    def downgraded(self) -> bool:
        return self._downgraded

    def _downgrade(self, exc: ToolsNotSupported) -> None:
        if self._downgraded:
            return
        self._downgraded = True
        self.downgrade_reason = str(exc)
        self.capabilities = self.text_model.capabilities
        logger.warning(
            "model {} ({}) refused native tools ({}); using prompt-mode tool calling "
            "({} format) from now on",
            self.name,
            self.model,
            exc,
            self.text_model.prompt_format,
        )

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        if self._downgraded:
            return await self.text_model.complete(messages, tools)
        try:
            return await self.inner.complete(messages, tools)
        except ToolsNotSupported as exc:
            if not tools:
                raise
            self._downgrade(exc)
        return await self.text_model.complete(messages, tools)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        if not self._downgraded:
            started = False
            try:
                async for event in self.inner.stream(messages, tools):
                    started = True
                    yield event
                return
            except ToolsNotSupported as exc:
                # Endpoints refuse `tools` before the first event; after one, a retry would
                # repeat text the user has already seen, so that is left to the caller.
                if started or not tools:
                    raise
                self._downgrade(exc)
        async for event in self.text_model.stream(messages, tools):
            yield event

    def prepare(self) -> None:
        self.inner.prepare()

    async def aclose(self) -> None:
        await self.inner.aclose()
