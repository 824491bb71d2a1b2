"""The core's state of one message's turn, kept beside the plugin's view of it.

`MessageContext` (function_calls/context.py) is what a plugin's handler gets; the turn's
state, which holds the whole `Storage`, the journal the turn's rows go to and the limit
bookkeeping, is the core's (issue 37 §2). It lives in the context's private slot, and the
router, the model door and the runtime read it through `turn_of(ctx)`; `ctx.turn` raises. This
module imports no other of the plugin API, so `plugin_data` reaches a handler's storage through
it without an import cycle (tests/test_layers.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chatfn.common.messages import StreamObserver
    from chatfn.common.metrics import Metrics
    from chatfn.storage.db import Storage, TurnStart
    from function_calls.fates import Fate
    from function_calls.journal import TurnJournal
    from providers.base import ChatModel

__all__ = ["TurnState", "turn_of"]


@dataclass(slots=True)
class TurnState:
    """The core's state of one message's turn (`turn_of(ctx)`): its model requests and limit
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


class _WithTurn(Protocol):
    """A `MessageContext`, as far as `turn_of` needs it (this module does not import that one:
    it imports this)."""

    @property
    def _turn(self) -> TurnState: ...


def turn_of(ctx: _WithTurn) -> TurnState:
    """The core's turn state of `ctx`, a `MessageContext` (its `Storage`, journal, limit
    bookkeeping, fate, stream observer): for the router, the model door and the runtime, not
    for plugins, whose view of the message is the context's own members."""
    return ctx._turn
