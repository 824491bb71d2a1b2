"""Rehearse before you switch (issue 40.5): a chat's recorded turns asked again of another
model, compared with what the bot answered then (or with a second model asked now), without
sending anything to any chat or running any function with effects.

`chatfn replay` (chatfn/replay.py) runs it over the chats a glob names; the console runs it
for one chat (`POST /admin/api/chats/{platform}/{chat_id}/replay`). The turns come from
chatfn/storage/replay.py, each is asked in engine.py, and report.py writes what came of it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from chatfn.runtime.replay.engine import Rehearsal, ReplayHost, Side, recorded_side
from chatfn.runtime.replay.report import html, report, turn_json
from chatfn.storage.replay import turns as recorded_turns
from providers.base import ChatModel

__all__ = ["RECORDED", "ReplayError", "html", "replay"]

#: `--against`'s default: what the bot answered then.
RECORDED = "recorded"


class ReplayError(ValueError):
    """A replay that cannot start (a model not configured); one line for its user."""


def _model(models: Callable[[str], ChatModel | None], name: str) -> ChatModel:
    found = models(name)
    if found is None:
        raise ReplayError(f"model {name!r} is not a key of models:")
    return found


async def replay(
    host: ReplayHost,
    models: Callable[[str], ChatModel | None],
    *,
    chats: str,
    since: datetime,
    model: str,
    against: str | None = None,
    limit: int = 50,
    persona: str | None = None,
) -> dict[str, Any]:
    """The report (report.py's shape) of up to `limit` turns since `since` in the chats
    `chats` matches (a glob over `platform:chat_id`), `model` against `against` (a model
    name; None: the recorded answers). `models(name)` is the configured model of that name.
    `persona`: a name under `personas:` that `model` is asked with instead of each chat's
    prompt (a persona tried before it is set)."""
    tried = _model(models, model)
    other = None if against in (None, RECORDED) else _model(models, against)
    if persona is not None and persona not in host.settings.personas:
        known = ", ".join(host.settings.personas) or "none"
        raise ReplayError(f"persona {persona!r} is not a key of personas: (have: {known})")
    storage = host.storage
    found = await storage.run_aside(recorded_turns, storage.engine, chats, since, limit)
    rehearsal = Rehearsal(host)
    rows = []
    for turn in found:
        mine = await rehearsal.ask(tried, turn, persona)
        theirs: Side = recorded_side(turn) if other is None else await rehearsal.ask(other, turn)
        rows.append(turn_json(turn, mine, theirs))
    run = {
        "chats": chats,
        "since": since.isoformat(),
        "model": model,
        "against": against or RECORDED,
        "persona": persona,
        "limit": limit,
    }
    return report(run, rows)
