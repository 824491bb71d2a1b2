"""The one interface every model adapter implements."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from providers.errors import ProviderTimeout
from providers.request_guard import check_model_request
from providers.types import LLMResponse, Message, ModelCapabilities, StreamEvent, ToolDefinition

#: Names the conversation the requests of the current turn belong to (a hash of the chat), for
#: providers that route requests with the same key to the same prompt cache (OpenAI's
#: `prompt_cache_key`). Set by the conversation builder; adapters without such a field ignore
#: it. A context variable, so the adapters' `complete(messages, tools)` interface stays as is.
prompt_cache_key: ContextVar[str | None] = ContextVar("prompt_cache_key", default=None)


if TYPE_CHECKING:
    from providers.config import ModelPrice
    from providers.fallback import FallbackChain

T = TypeVar("T")

#: True while a request goes through the bot's accounting (function_calls.model_calls: usage
#: row, metrics, limits). A model the bot serves (`guarded`, set by chatfn/runtime/model_set.py)
#: refuses a request made without it, so a plugin cannot spend on the configured models
#: without the spend being counted: `ctx.ask_model(...)` is the way in.
accounted: ContextVar[bool] = ContextVar("accounted", default=False)


class UnaccountedRequest(RuntimeError):
    """A request to a model the bot serves, made around its accounting."""


@contextlib.contextmanager
def accounting() -> Iterator[None]:
    """Requests made inside are on record (the accounting itself, and operator tooling such as
    `check_system.py --online` that no chat pays for)."""
    token = accounted.set(True)
    try:
        yield
    finally:
        accounted.reset(token)


def _check_accounted(model: ChatModel) -> None:
    if model.guarded and not accounted.get():
        raise UnaccountedRequest(
            f"model {model.name}: a request outside the bot's accounting (usage, limits); "
            "functions ask a model with `await ctx.ask_model(...)`"
        )


def _guarded_complete(method: Callable[..., Awaitable[LLMResponse]]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def complete(self: ChatModel, *args: Any, **kwargs: Any) -> LLMResponse:
        _check_accounted(self)
        return await method(self, *args, **kwargs)

    complete.guards = True  # type: ignore[attr-defined]
    return complete


def _guarded_stream(method: Callable[..., AsyncIterator[StreamEvent]]) -> Callable[..., Any]:
    @functools.wraps(method)
    def stream(self: ChatModel, *args: Any, **kwargs: Any) -> AsyncIterator[StreamEvent]:
        _check_accounted(self)
        return method(self, *args, **kwargs)

    stream.guards = True  # type: ignore[attr-defined]
    return stream


async def within(seconds: float, work: Awaitable[T], provider: str) -> T:
    """`work` bounded as a whole (`models.<name>.timeout`): an SDK timeout bounds each read, so a
    server trickling one byte a second would otherwise keep a request alive for ever."""
    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        raise ProviderTimeout(
            f"no complete answer within {seconds:g} s", provider=provider
        ) from None


async def bounded_stream(
    events: AsyncIterator[StreamEvent], seconds: float, provider: str
) -> AsyncIterator[StreamEvent]:
    """A stream that must end within `seconds` of its start (not of its last chunk). The bound
    is applied around each step of the inner stream only, so time the consumer spends between
    events (writing to a slow channel) is not cut short by a cancellation it cannot see."""
    deadline = asyncio.get_running_loop().time() + seconds
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    event = await anext(events)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise ProviderTimeout(
                    f"stream not finished within {seconds:g} s", provider=provider
                ) from None
            yield event
    finally:
        await events.aclose()  # type: ignore[attr-defined]


class ChatModel(ABC):
    """A configured model. Adapters convert our vocabulary to a wire format and back, and own
    nothing else: no history, no tool execution, no retries beyond the SDK's own."""

    #: The provider family ("openai", "anthropic", "gemini", "scripted").
    provider: str = ""
    #: Requests only through the accounting (`accounted`): set on every model the bot serves.
    guarded: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every adapter's `complete` and `stream` check the guard, whoever writes the
        adapter (a plugin's own included): checked where the request starts, not trusted to
        each subclass remembering it."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "complete" in own and not getattr(own["complete"], "guards", False):
            cls.complete = _guarded_complete(own["complete"])  # type: ignore[method-assign]
        if "stream" in own and not getattr(own["stream"], "guards", False):
            cls.stream = _guarded_stream(own["stream"])  # type: ignore[method-assign]

    def __init__(self, name: str, model: str, capabilities: ModelCapabilities) -> None:
        self.name = name  # the key under `models:` in config
        self.model = model  # the provider's model id
        self.capabilities = capabilities
        # The context window in tokens, once a context-length error has stated it: later
        # requests are cut to it before they are sent, so one oversized message does not cost
        # every later turn of its chat a refused request.
        self.context_limit: int | None = None
        # The models that take a request this one failed (`models.<name>.fallback`); set by
        # whoever builds the model from config (chatfn/runtime/model_set.py).
        self.fallback: FallbackChain[ChatModel] | None = None
        # What the provider bills for it (`models.<name>.price`): usage rows carry a cost.
        self.price: ModelPrice | None = None

    @abstractmethod
    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        """One request, the whole answer. Raises providers.errors.ProviderError subclasses."""

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream an answer. The default falls back to `complete` for adapters without streaming;
        the final event is always `done` carrying the assembled response."""
        response = await self.complete(messages, tools)
        if response.content:
            yield StreamEvent(type="text", text=response.content)
        for index, call in enumerate(response.tool_calls):
            yield StreamEvent(type="tool_call_start", index=index, tool_call=call)
            yield StreamEvent(type="tool_call_end", index=index, tool_call=call)
        yield StreamEvent(type="done", response=response)

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Load what the first request needs (an SDK, its client) ahead of it. The bot runs it
        in a thread once its channels answer, so start-up does not wait for it."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release HTTP clients; called once at shutdown."""


class ServerModel(ChatModel):
    """An adapter that talks to a server: each request is bounded as a whole by its model's
    `timeout` (an SDK timeout bounds each read only). Subclasses write `_complete` and
    `_stream`, set `timeout` and say where they send (`endpoint`): under test, a request to a
    host that is not loopback is refused before it is sent (providers/request_guard.py)."""

    timeout: float

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> LLMResponse:
        check_model_request(self.name, self.endpoint())
        return await within(self.timeout, self._complete(messages, tools), self.provider)

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None = None
    ) -> AsyncIterator[StreamEvent]:
        check_model_request(self.name, self.endpoint())
        return bounded_stream(self._stream(messages, tools), self.timeout, self.provider)

    @abstractmethod
    def endpoint(self) -> str:
        """The base URL requests go to, as the SDK client will send them (its own default or
        environment variable included), for the test guard."""

    @abstractmethod
    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
    ) -> LLMResponse: ...

    @abstractmethod
    def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition] | None
    ) -> AsyncIterator[StreamEvent]: ...


async def collect(events: AsyncIterator[StreamEvent]) -> LLMResponse:
    """Drain a stream and return its final response."""
    final: LLMResponse | None = None
    async for event in events:
        if event.type == "done":
            final = event.response
    if final is None:  # adapters guarantee a done event or an exception; be loud if not
        raise RuntimeError("stream ended without a done event")
    return final
