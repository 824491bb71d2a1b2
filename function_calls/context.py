"""The per-message context every handler receives.

The message types themselves live in `common.messages` (channels import them from there); they
are re-exported here because plugins have always imported them from this module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from loguru import logger as _root_logger
from pydantic import BaseModel

from chatfn.common.chat_keys import ChatKey
from chatfn.common.config import CoreSettings
from chatfn.common.i18n import translate
from chatfn.common.messages import (
    Deliver,
    IncomingMessage,
    OutgoingMessage,
    StreamObserver,
    SystemEvent,
)
from chatfn.common.metrics import Counter
from function_calls.chat_settings import ChatSettings, resolve
from function_calls.permissions import refusal_reason
from function_calls.plugin import Services
from function_calls.speech import speak

if TYPE_CHECKING:
    from loguru import Logger

    from chatfn.common.metrics import Metrics
    from chatfn.storage.chat_state import ChatStats, Summary
    from chatfn.storage.db import Storage, StoredMessage, TurnStart
    from function_calls.fates import Fate
    from function_calls.journal import TurnJournal
    from function_calls.registry import Registry
    from function_calls.spec import FunctionSpec
    from providers.base import ChatModel
    from providers.types import LLMResponse, Message, ToolDefinition

__all__ = [
    "Deliver",
    "IncomingMessage",
    "MessageContext",
    "ModelRequest",
    "OutgoingMessage",
    "StreamObserver",
    "SystemEvent",
]

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")


@dataclass(slots=True)
class TurnState:
    """The core's state of one message's turn (`ctx.turn`): its model requests and limit
    bookkeeping, where its rows go, its fate, and what the runtime wires in (the stream
    observer, metrics, clock, images, model resolution) and the whole `Storage`. Not the
    plugin's view: a plugin reads `MessageContext`'s own members (issue 37 §2); this is the
    router's and the runtime's, and no built-in reads it (tests/function_calls/test_plugin_view.py).
    """

    # The bot's whole database (chatfn/storage/db.py): the core's turn writes and reads go
    # through it; a plugin reaches the database through `MessageContext`'s doors (history,
    # the chat's summary and stats) and `plugin.database(ctx)`, its declared tables.
    storage: Storage
    requests: int = 0
    reserved_calls: int = 0
    # Where the turn's usage rows, limit counts and audit rows go (function_calls/journal.py):
    # set by the runtime for a whole turn, else by `FunctionCallRouter.dispatch`; None outside
    # a dispatch (a plugin's job calling `ask`): each row is written on its own.
    journal: TurnJournal | None = None
    # What `Storage.begin_turn` read and counted with the message (runtime): the history
    # window and the limit verdict, so the turn does not read or count them again.
    start: TurnStart | None = None
    # The limit checks that `start` counted (limits.plan), as (scope, metric, check).
    limit_plan: list[Any] | None = None
    # The model this turn stands in with because the chat is over a budget (limits.py
    # `Downgrade`): its spend also counts on that model's own budget.
    downgraded: str | None = None
    # Set by the channel to stop the reply (the console's Ctrl-C): the streamed request ends
    # with what was shown as its answer, and no other request is made (model_calls.py).
    stop: asyncio.Event | None = None
    # The message was counted as one that reaches a model (`messages_per_minute`): with its
    # turn (`limits.admit`), or by its first model request on any other path, a slash
    # command's (`limits.admit_call`). Once per message; `counting` makes a function's
    # concurrent first requests count it once.
    counted: bool = False
    counting: asyncio.Lock = field(default_factory=asyncio.Lock)
    # What became of the message (function_calls/fates.py), set on each of the router's paths
    # and recorded by the runtime when the turn ends.
    fate: Fate | None = None
    # Set by channels that can show text as it arrives (console, HTTP streaming).
    on_stream: StreamObserver | None = None
    # The bot's metrics (None in a bare context): fallbacks, tool calls, limit refusals.
    metrics: Metrics | None = None
    # Seconds since the epoch: what "now" is for the model's time note. Injectable so a
    # benchmark, a test or a replay can run a conversation over minutes of the bot's time.
    clock: Callable[[], float] = time.time
    # The message's images, fetched for a model with vision (providers.types.ImagePart).
    images: list[Any] = field(default_factory=list)
    # `bot.vision_model`: describes the images for a chat model without vision.
    vision_model: ChatModel | None = None
    # What the vision model saw in each image (None: it could not say).
    image_descriptions: list[str | None] = field(default_factory=list)
    # The configured model of a name (built on first use), None when there is none: the
    # downgrade model of `limits.on_exceed`, `bot.summary_model`.
    model_named: Callable[[str], ChatModel | None] = lambda _name: None


@dataclass(slots=True)
class ModelRequest:
    """One request to a plugin's own model (`ctx.model_request`): the tokens it reports."""

    name: str
    model_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def tokens(self, prompt: int, completion: int) -> None:
        """The tokens the service reported for this request (counted against the limits)."""
        self.prompt_tokens, self.completion_tokens = max(prompt, 0), max(completion, 0)


class ModelDoor(Protocol):
    """How a context's `ask_model` and `model_request` reach a model, accounted
    (function_calls/model_access.py `DOOR`)."""

    async def ask_model(
        self,
        ctx: MessageContext,
        prompt: str | Sequence[Message],
        *,
        system: str | None,
        model: str | None,
        tools: Sequence[ToolDefinition] | None,
        stream: bool,
    ) -> LLMResponse: ...

    def model_request(
        self, ctx: MessageContext, name: str, model_id: str
    ) -> AbstractAsyncContextManager[ModelRequest]: ...

    def meter(
        self,
        ctx: MessageContext,
        name: str,
        model_id: str,
        latency: float,
        outcome: str,
        cost: float | None,
    ) -> None: ...


class MessageContext:
    """One per incoming message: who, where, whether the bot was addressed, and the services a
    handler may use. Handlers get everything they need from here, never from globals."""

    __slots__ = (
        "message",
        "is_admin",
        "config",
        "model",
        "logger",
        "sent",
        "_deliver",
        "_door",
        "services",
        "stored_id",
        "registry",
        "chat",
        "turn",
        "model_names",
    )

    def __init__(
        self,
        message: IncomingMessage,
        *,
        is_admin: bool,
        config: CoreSettings,
        storage: Storage,
        deliver: Deliver,
        model: ChatModel | None = None,
        services: Services | None = None,
        stored_id: int | None = None,
        registry: Registry | None = None,
        on_stream: StreamObserver | None = None,
        chat: ChatSettings | None = None,
        metrics: Metrics | None = None,
        model_names: list[str] | None = None,
        clock: Callable[[], float] = time.time,
        vision_model: ChatModel | None = None,
        model_named: Callable[[str], ChatModel | None] | None = None,
        model_door: ModelDoor | None = None,
    ) -> None:
        self.message = message
        # The accounted way to a model (function_calls/model_access.py's `DOOR`, given by the
        # runtime): that module imports this one, so this one is handed it, never imports it.
        self._door = model_door
        self.is_admin = is_admin
        self.config = config
        self.model = model
        self._deliver = deliver
        self.sent: list[OutgoingMessage] = []
        # What plugins provided for their handlers (`service(SomeClient)`).
        self.services = services if services is not None else Services()
        # Row id of this message in history: history() returns what came before it.
        self.stored_id = stored_id
        # The functions of this bot (the `help` built-in lists them).
        self.registry = registry
        # This chat's effective settings: model, persona, history size, reply mode, functions.
        self.chat = chat if chat is not None else resolve(config, message)
        self.turn = TurnState(
            storage=storage,
            on_stream=on_stream,
            metrics=metrics,
            clock=clock,
            vision_model=vision_model,
            model_named=model_named or (lambda _name: None),
        )
        # The names under `models:` this bot can use (`/model` lists them).
        self.model_names = model_names if model_names is not None else []
        self.logger: Logger = _root_logger.bind(
            chat_id=message.chat_id, message_id=message.message_id, sender_id=message.sender_id
        )

    async def ask_model(
        self,
        prompt: str | Sequence[Message],
        *,
        system: str | None = None,
        model: str | None = None,
        tools: Sequence[ToolDefinition] | None = None,
        stream: bool = False,
    ) -> LLMResponse:
        """Ask a model on behalf of this message, counted like the chat's own turns: a usage
        row, the metrics, `/stats`, and the limits `model_calls_per_day` / `tokens_per_day`
        per user and per chat (checked first: over one, `LimitReached` and nothing is asked).
        `prompt`: a text (the user turn, after `system` when given) or whole messages; `model`:
        a name under `models:` (default: this chat's model, fallback chain and all); `stream`:
        show the answer as it arrives where the channel streams. Raises ProviderError as the
        chat's own requests do. The only way to a configured model: a request made any other
        way is refused (`providers.base.UnaccountedRequest`)."""
        return await self._model_door().ask_model(
            self, prompt, system=system, model=model, tools=tools, stream=stream
        )

    def model_request(self, name: str, model_id: str) -> AbstractAsyncContextManager[ModelRequest]:
        """A request to a model of the plugin's own (not under `models:`, e.g. a search API),
        counted the same way: `async with ctx.model_request("web_search", "sonar") as call:`
        checks the limits first (`LimitReached`), then, whatever happens inside, writes the
        usage row and metrics with the tokens given to `call.tokens(prompt, completion)`.
        `name` is the plugin's name (metrics know plugin names, not free text)."""
        return self._model_door().model_request(self, name, model_id)

    def _model_door(self) -> ModelDoor:
        if self._door is None:
            raise RuntimeError(
                "this context was built without a model door (Bot.context gives one)"
            )
        return self._door

    def settings(self, model: type[S]) -> S:
        """A plugin's validated config section, by its settings model (typed)."""
        return self.config.section(model)

    @property
    def language(self) -> str:
        """The language the bot speaks in this chat (a `chats:` rule's, else `bot.language`)."""
        return self.chat.language

    def t(self, key: str, /, **fmt: object) -> str:
        """The catalogue text of `key` in this chat's language (see `common.i18n`)."""
        return translate(self.language, key, **fmt)

    def no_model_reply(self) -> str:
        """What a user hears when no model is configured: `bot.no_model_reply` or the
        catalogue's sentence."""
        return self.config.bot.no_model_reply or self.t("core.no_model")

    def service(self, cls: type[T]) -> T | None:
        """The service of type `cls` a plugin provided (None when its plugin is not running)."""
        return self.services.get(cls)

    def counter(self, name: str) -> Counter:
        """A counter a plugin declared (`Plugin(metrics=[Metric(name, ...)])`); a context made
        without the bot's metrics (a unit test) counts into a counter of its own, unlabelled."""
        if self.turn.metrics is None:
            return Counter(name, "", [])
        return self.turn.metrics.declared(name)

    def usable_functions(self, *, via_command: bool = True) -> list[FunctionSpec]:
        """The functions this sender may use in this chat now (scope, admin, per-chat lists and
        plugins' own rules applied): what `/help` lists. `via_command=False` gives what the
        model is offered (then `require_at` counts too)."""
        specs = self.registry.all() if self.registry is not None else []
        return [s for s in specs if refusal_reason(s, self, via_command=via_command) is None]

    @property
    def is_group(self) -> bool:
        return self.message.is_group

    @property
    def text(self) -> str:
        return self.message.text

    async def reply(
        self,
        text: str,
        at: str | None = None,
        *,
        thinking: str | None = None,
        notice: bool = False,
        images: list[str] | None = None,
        buttons: list[tuple[str, str]] | None = None,
    ) -> None:
        """Send `text` to this chat (stored in history, delivered by the channel). `thinking`,
        the model reasoning that led to it, is stored with it and never sent. In groups the
        sender is @-mentioned unless `at` names someone else or the chat's
        `reply_with_mention` is off; `reply_with_quote` makes channels quote the message.
        `images` (URLs or data URIs) go with the text as the platform's image message. Where
        the chat's `voice.tts` asks for it, the text is spoken too (function_calls/speech.py):
        its audio goes with it as the platform's voice message. `buttons`: (label, text a
        press sends) under the text where the platform has buttons (OutgoingMessage)."""
        msg = self.message
        if msg.is_group and at is None and self.chat.reply_with_mention:
            at = msg.sender_id
        out = OutgoingMessage(
            platform=msg.platform,
            chat_id=msg.chat_id,
            text=text,
            is_group=msg.is_group,
            at=at if msg.is_group else None,
            reply_to=msg.message_id or None,
            thinking=thinking,
            notice=notice,
            quote=self.chat.reply_with_quote and bool(msg.message_id),
            images=list(images or []),
            buttons=list(buttons or []),
        )
        if not notice:
            out.audio, out.text = await speak(self, text, self._door.meter if self._door else None)
        self.sent.append(out)
        await self._deliver(out)

    async def history(self, limit: int = 20, *, after_id: int | None = None) -> list[StoredMessage]:
        """The chat's last `limit` stored messages before this one and after its `/reset`
        point (and after row `after_id`: the end of a compacted history), oldest first (read
        off the event loop; the window the turn's start read already is not read again when it
        starts at or before the point asked for: the rows after that point are its newest, so
        they are all in it)."""
        start = self.turn.start
        if (
            start is not None
            and start.history is not None
            and limit <= start.history_limit
            and (start.after is None or (self._after(after_id) or 0) >= start.after)
        ):
            rows = start.history
            if after_id is not None:
                rows = [r for r in rows if r.id > after_id]
            return rows[-limit:] if limit < len(rows) else rows
        storage = self.turn.storage
        return await storage.run(
            storage.recent_messages,
            self.message.platform,
            self.message.chat_id,
            limit,
            before_id=self.stored_id,
            after_id=self._after(after_id),
        )

    async def history_count(self, *, after_id: int | None = None) -> int:
        """How many stored messages of this chat come before this one (after its `/reset`
        point, and after row `after_id`): the absolute position the history window is cut at,
        in blocks."""
        start = self.turn.start
        if start is not None and start.count is not None and self._after(after_id) == start.after:
            return start.count
        storage = self.turn.storage
        return await storage.run(
            storage.count_messages,
            self.message.platform,
            self.message.chat_id,
            before_id=self.stored_id,
            after_id=self._after(after_id),
        )

    async def history_since(self, since: datetime, *, limit: int = 500) -> list[StoredMessage]:
        """This chat's stored messages from `since` on, before this one, oldest first: the
        newest `limit` of them (the summary built-in's "/summary 2h")."""
        storage = self.turn.storage
        msg = self.message
        rows = await storage.run(
            storage.messages_since, msg.platform, msg.chat_id, since, limit=limit
        )
        return [r for r in rows if self.stored_id is None or r.id < self.stored_id]

    async def chat_summary(self) -> Summary | None:
        """The summary of this chat's compacted history (function_calls/compaction.py), None
        when there is none."""
        storage = self.turn.storage
        msg = self.message
        return await storage.run(storage.chat_state.summary, msg.platform, msg.chat_id)

    async def clear_chat_summary(self) -> None:
        """Forget this chat's compacted history's summary (`/reset`)."""
        storage = self.turn.storage
        msg = self.message
        await storage.run(storage.chat_state.clear_summary, msg.platform, msg.chat_id)

    async def chat_stats(self, *since: datetime) -> list[ChatStats]:
        """This chat's messages from users, model calls, tokens, cost and top users from each
        of `since` on, read together off the event loop (`/stats`)."""
        storage = self.turn.storage
        msg = self.message

        def read() -> list[ChatStats]:
            return [storage.chat_state.stats(msg.platform, msg.chat_id, s) for s in since]

        return await storage.run(read)

    async def usage_by_chat(self, since: datetime) -> list[tuple[str, str, ChatStats]]:
        """(platform, chat id, stats) of every chat with a message or a model call from
        `since` on (`/stats all`). Every chat's numbers are the bot's admins' to read: for
        anyone else a PermissionError."""
        if not self.is_admin:
            raise PermissionError("usage_by_chat: every chat's numbers are for the bot's admins")
        state = self.turn.storage.chat_state

        def read() -> list[tuple[str, str, ChatStats]]:
            return [(p, c, state.stats(p, c, since)) for p, c in state.chats_with_usage(since)]

        return await self.turn.storage.run(read)

    @property
    def storage(self) -> Any:
        """Gone (issue 37 §2): a plugin reaches the database through its declared tables and
        the doors above, not the whole `Storage`. Raises with where to go instead."""
        raise AttributeError(
            "MessageContext.storage is gone: a plugin reads and writes its own tables through "
            "plugin.database(ctx) (Plugin(tables=...)), and this chat's records through "
            "ctx.history(), ctx.history_since(), ctx.chat_summary(), ctx.chat_stats() "
            "(docs/writing-functions.md)"
        )

    def _after(self, after_id: int | None) -> int | None:
        marks = [m for m in (self.chat.reset_after, after_id) if m is not None]
        return max(marks) if marks else None

    async def set_chat_override(self, key: str | ChatKey[Any], value: Any) -> None:
        """Change this chat's `key` from the chat, for this chat alone; stored, so it survives
        restarts. Takes effect from the next message. The key is one declared overridable
        (chatfn/common/chat_keys.py: the core's "model", "persona", ..., a plugin's
        `ChatKey(..., override=True)`) or "reset"; a plugin's value is validated and stored as
        its declaration says (pydantic's ValidationError on a bad one). Anything else: a
        ValueError naming the key."""
        name = key if isinstance(key, str) else key.name
        declared = next((k for k in self.config.chat_keys if k.name == name), None)
        if name != "reset" and (declared is None or not declared.override):
            raise ValueError(f"{name}: not a per-chat key a chat's admins may override")
        text = str(value)
        if declared is not None and declared.owner != "core":
            text = declared.encode(declared.validate(value))
        elif declared is not None and declared.choices and value not in declared.choices:
            raise ValueError(f"{name}: one of {', '.join(map(str, declared.choices))}")
        storage = self.turn.storage
        await storage.run(
            storage.chat_state.set_override,
            self.message.platform,
            self.message.chat_id,
            name,
            text,
            self.message.sender_id,
        )

    async def clear_chat_override(self, key: str | ChatKey[Any]) -> None:
        """Return this chat's `key` to what the config says."""
        name = key if isinstance(key, str) else key.name
        storage = self.turn.storage
        await storage.run(
            storage.chat_state.clear_override,
            self.message.platform,
            self.message.chat_id,
            name,
        )
