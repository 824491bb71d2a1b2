"""The provider-neutral vocabulary every adapter converts to and from.

It is OpenAI-shaped (as the design notes chose) because that is the shape most providers copy;
adapters for other wire formats carry what OpenAI has no field for (thinking signatures, Gemini
thought signatures) in `ThinkingBlock` and `ToolCall.provider_data` so it can be replayed verbatim
on the next turn of a tool loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from chatfn.common.messages import StreamEvent as _StreamEvent
from chatfn.common.messages import StreamEventType, ToolCall, parse_arguments

__all__ = [
    "ImagePart",
    "LLMResponse",
    "Message",
    "ModelCapabilities",
    "StreamEvent",
    "StreamEventType",
    "ThinkingBlock",
    "ToolCall",
    "ToolDefinition",
    "Usage",
    "parse_arguments",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class ToolDefinition:
    """A function offered to the model: a name, what it is for, and a JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ThinkingBlock:
    """Model reasoning. Kept so it can be replayed (Anthropic signatures, DeepSeek
    reasoning_content) and logged at debug level; never shown to users unless config asks."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    # Anthropic redacted_thinking carries an encrypted `data` payload instead of text.
    data: str | None = None
    # Which provider produced it: a signature is only valid for the provider that made it.
    provider: str | None = None


@dataclass(slots=True)
class ImagePart:
    """An image sent with a user turn (models with `vision: true`): its bytes and type; each
    adapter writes it in its provider's form (OpenAI `image_url`, Anthropic `image` block,
    Gemini `inline_data`)."""

    mime_type: str
    data: bytes

    def data_uri(self) -> str:
        import base64

        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode()}"

    def base64(self) -> str:
        import base64

        return base64.b64encode(self.data).decode()


@dataclass(slots=True)
class Message:
    """One turn in a conversation sent to a model."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    # For role="tool": the function name (Gemini's functionResponse needs it); for role="user" in
    # group chats, the speaker's display name.
    name: str | None = None
    # For role="tool": the call failed (Anthropic `is_error`, Gemini `error` response).
    is_error: bool = False
    thinking: list[ThinkingBlock] = field(default_factory=list)
    # For role="user": images after the text (content parts).
    images: list[ImagePart] = field(default_factory=list)


@dataclass(slots=True)
class Usage:
    """Tokens as the provider reported them. `input_tokens` is the whole prompt (cached part
    included); `output_tokens` the whole completion (reasoning included); the detail fields
    are parts of those: OpenAI `prompt_tokens_details.cached_tokens`, DeepSeek
    `prompt_cache_hit_tokens`, Anthropic `cache_read_input_tokens` (`cache_write_tokens`:
    `cache_creation_input_tokens`), Gemini `cachedContentTokenCount`; reasoning: OpenAI
    `completion_tokens_details.reasoning_tokens`, Gemini `thoughtsTokenCount`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(slots=True)
class LLMResponse:
    """A whole model answer: text and/or tool calls."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: list[ThinkingBlock] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None

    def as_message(self) -> Message:
        """The assistant turn to append to the conversation before the tool results."""
        return Message(
            role="assistant",
            content=self.content,
            tool_calls=list(self.tool_calls),
            thinking=list(self.thinking),
        )


# The providers' stream events, whose `done` carries an LLMResponse (chatfn.common's StreamEvent
# is generic in it, so that channels need not know this module). At run time the class itself:
# calling the subscripted alias costs ~10 us an event (it tries to set `__orig_class__` on a
# slotted instance), ~4x the event.
if TYPE_CHECKING:
    StreamEvent: TypeAlias = _StreamEvent[LLMResponse]
else:
    StreamEvent = _StreamEvent

NativeTools = bool | Literal["auto"]
PromptFormat = Literal["hermes", "json_block", "xml_tag", "function_call"]


@dataclass(slots=True)
class ModelCapabilities:
    """What a configured model can do; the tool loop reads these, adapters set defaults."""

    native_tools: NativeTools = True
    prompt_format: PromptFormat = "hermes"
    streaming: bool = True
    system_message: bool = True
    vision: bool = False
    thinking: bool = False
    # Forward reasoning to channels that show streams (`models.<name>.thinking.show`). Not a
    # capability but per-model config the tool loop needs, and capabilities travel with the
    # model through every wrapper (prompt tools, auto-downgrade).
    show_thinking: bool = False
    # Tokens a request may hold (`models.<name>.context_tokens`): the history sent is cut to
    # fit. Conservative by default, below every current model's window.
    context_tokens: int = 16000
