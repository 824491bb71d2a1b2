"""Per-chat keys, each declared once: its name, its type, its default and whether a chat's admins
(and the admin console) may override it for one chat.

Everything that lists per-chat keys reads these declarations, the core's (`CORE_CHAT_KEYS`) and
the plugins' (`Plugin(chat_keys=[...])`): a `chats:` rule's validation (the runtime adds one
field per plugin key to the rule model, so a bad value names `chats[0].<key>`), the chat's
resolved settings (`ChatSettings.get(key)`), `/settings`, the overrides a chat's admins and the
console may set (and which of them make `Storage.begin_turn` plan a turn again), and the
console's chat form. A new per-chat key is one declaration plus its use:

    TONE = ChatKey("tone", Literal["plain", "pirate"], "plain", override=True,
                   description="How the bot talks in this chat.")
    plugin = Plugin("tone", chat_keys=[TONE])

    async def handler(ctx: MessageContext) -> FunctionResult:
        tone = ctx.chat.get(TONE)          # the override, else the first rule, else "plain"
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

T = TypeVar("T")

#: How the console's chat form edits a key (`ChatKey.form`).
Form = Literal["choice", "bool", "list", "number", "text", "json"]


@dataclass(frozen=True, eq=False)
class ChatKey(Generic[T]):
    """One per-chat setting.

    `type`: what a value must be (any type pydantic validates: `bool`, `int`, `list[str]`,
    `Literal["a", "b"]`, a model); a `chats:` rule may also leave it out (None: not named).
    `default`: the value where no override and no rule names it. `override`: a chat's admins
    and the console may set it for one chat (stored in `chat_overrides`). `replans`: an
    override changes what a turn counts or whether it runs, so the turn is planned again
    from it (`limits`, `respond_in_groups`). `shown`: a line of `/settings`. `rule`: a key of
    `chats:` rules (False: an override only, as `limits`).
    """

    name: str
    type: Any = str
    default: T = None  # type: ignore[assignment]
    override: bool = False
    replans: bool = False
    shown: bool = True
    rule: bool = True
    description: str = ""
    owner: str = field(default="core", compare=False)

    @cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.type)

    def validate(self, value: Any) -> T:
        """`value` as this key's type; raises pydantic's ValidationError."""
        return self._adapter.validate_python(value)  # type: ignore[no-any-return]

    def encode(self, value: Any) -> str:
        """An override's stored text: strings as they are, anything else as JSON."""
        if self.form in ("choice", "text") and isinstance(value, str):
            return value
        return json.dumps(self._adapter.dump_python(value, mode="json"), ensure_ascii=False)

    def decode(self, text: str) -> T:
        """A stored override's value."""
        if self.form in ("choice", "text"):
            return self.validate(text)
        return self.validate(json.loads(text))

    def dump(self, value: Any) -> Any:
        """`value` as JSON (the console)."""
        return self._adapter.dump_python(value, mode="json")

    def show(self, value: Any) -> str:
        """`value` as `/settings` writes it (an empty value: "")."""
        if isinstance(value, list | tuple | set):
            return ", ".join(str(v) for v in value)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)

    @property
    def choices(self) -> list[Any] | None:
        """The values a `Literal` type allows (the console offers them), else None."""
        found = _literal(self.type)
        return list(found) if found is not None else None

    @property
    def form(self) -> Form:
        """How the console edits it."""
        base = _optional_base(self.type)
        if _literal(base) is not None:
            return "choice"
        if base is bool:
            return "bool"
        if base in (int, float):
            return "number"
        if get_origin(base) in (list, tuple, set) and all(a is str for a in get_args(base)):
            return "list"
        return "text" if base is str else "json"

    def describe(self) -> dict[str, Any]:
        """What the console's form needs to edit it."""
        return {
            "name": self.name,
            "form": self.form,
            "choices": self.choices,
            "default": self.dump(self.default) if self.default is not None else None,
            "description": self.description,
            "owner": self.owner,
        }


def _optional_base(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _literal(annotation: Any) -> tuple[Any, ...] | None:
    base = _optional_base(annotation)
    return get_args(base) if get_origin(base) is Literal else None


class VoiceChat(BaseModel):
    """A chat's voice switches (`chats[].voice`, the `voice` override): `stt` transcribes the
    voice messages its members send (when `voice.stt` names a provider); `tts` speaks the
    bot's replies: "off", "on" (every reply) or "auto" (a reply to a voice message)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Transcribe the voice messages members send (when `voice.stt` has a model).
    stt: bool = True
    # Speak the bot's replies: "off", "on" (every reply) or "auto" (a reply to a voice message).
    tts: Literal["off", "on", "auto"] = "off"


#: A chat's voice switches (`ctx.chat.get(VOICE)`): set in `chats:` rules, a chat's override
#: (`/tts`, the console's chat form). Declared by the core but resolved, shown and edited as
#: a plugin's key is (its owner is "voice"), so nothing lists it by hand.
VOICE: ChatKey[VoiceChat] = ChatKey(
    "voice",
    VoiceChat,
    VoiceChat(),
    override=True,
    description="Voice: {stt: true/false, tts: off/on/auto}.",
    owner="voice",
)

#: Whether the bot answers accounts the platform marks as bots (`IncomingMessage.sender_is_bot`)
#: in a chat: off by default, so two bots do not talk forever (README, "Loop guard"). Resolved
#: as a plugin's key is (its owner is "loop_guard"), like `voice`.
ANSWER_BOTS: ChatKey[bool] = ChatKey(
    "answer_bots",
    bool,
    False,
    override=True,
    description="Answer messages from accounts the platform marks as bots.",
    owner="loop_guard",
)


class AmbientChat(BaseModel):
    """A group's ambient context (`chats[].ambient`, the `ambient` override): the messages
    its members wrote without addressing the bot, shown to the model when it is addressed,
    marked as background chatter with each speaker named (function_calls/conversation.py).
    `messages`: at most this many of the newest, from the history window the turn reads;
    `tokens`: and at most about this many tokens (the newest kept). Off: such messages are
    not shown to the model at all (they are stored, their fate `not_addressed`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Show the model what members said without addressing the bot.
    enabled: bool = True
    # At most this many of the newest such messages, from the history window the turn reads.
    messages: int = Field(default=20, ge=1, le=500)
    # And at most about this many tokens of them (the newest kept).
    tokens: int = Field(default=1000, ge=50)

    def __str__(self) -> str:  # how /settings shows it
        if not self.enabled:
            return "off"
        return f"on, {self.messages} messages, {self.tokens} tokens"


#: A group's ambient context (`ctx.chat.get(AMBIENT)`): set in `chats:` rules or a chat's
#: override (the console's chat form); resolved and shown as a plugin's key is.
AMBIENT: ChatKey[AmbientChat] = ChatKey(
    "ambient",
    AmbientChat,
    AmbientChat(),
    override=True,
    description="Ambient context: {enabled: true/false, messages: 20, tokens: 1000}.",
    owner="ambient",
)

#: The core's per-chat keys, in the order `/settings` shows them. Their values come from
#: `bot:` (and `limits:`) where no rule names them; `function_calls/chat_settings.py` resolves
#: them, and the console validates the ones it changes against the running bot (a model that
#: exists, functions that match).
CORE_CHAT_KEYS: tuple[ChatKey[Any], ...] = (
    ChatKey("model", str, override=True, description="A model under `models:`."),
    ChatKey("persona", str, override=True, description="A persona's name or a system prompt."),
    ChatKey("history_size", int, description="Stored messages a turn shows the model."),
    ChatKey(
        "respond_in_groups",
        Literal["at", "always", "never"],
        "at",
        override=True,
        replans=True,
        description="When the bot answers in a group.",
    ),
    ChatKey("reply_with_mention", bool, description="Replies mention the sender."),
    ChatKey("reply_with_quote", bool, description="Replies quote the message."),
    ChatKey(
        "language",
        Literal["en", "zh"],
        "en",
        override=True,
        description="The language of the bot's own words.",
    ),
    VOICE,
    ANSWER_BOTS,
    AMBIENT,
    ChatKey("functions", dict[str, Any], override=True, description="enabled / disabled."),
    ChatKey("on_exceed", Any, description="Over a budget: refuse, or {downgrade_to: MODEL}."),
    ChatKey(
        "limits",
        dict[str, Any],
        override=True,
        replans=True,
        shown=False,
        rule=False,
        description="per_chat / per_user limits.",
    ),
)


def override_keys(keys: tuple[ChatKey[Any], ...]) -> tuple[str, ...]:
    """The names a chat's admins and the console may override, in declaration order."""
    return tuple(k.name for k in keys if k.override)


def replan_keys(keys: tuple[ChatKey[Any], ...]) -> frozenset[str]:
    """The overrides after which a turn is planned again (`Storage.begin_turn`)."""
    return frozenset(k.name for k in keys if k.replans)
