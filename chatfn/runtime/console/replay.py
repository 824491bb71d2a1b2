"""The console's replay of one chat (issue 40.5): `chatfn replay` for the chat a page shows,
at most `MAX_TURNS` turns, answered as JSON (chatfn/runtime/replay/report.py's shape). It asks
models, so owners only (the route checks), and the request is audited."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chatfn.runtime.console.errors import ConsoleError
from chatfn.runtime.replay import RECORDED, ReplayError, replay

#: Turns one console request may replay (each is one or more model requests, while it waits).
MAX_TURNS = 20
DEFAULT_TURNS = 5


def exact_glob(text: str) -> str:
    """`text` as a glob that matches it alone (a chat id may hold `*`, `?` or `[`)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _options(body: Any, models: list[str]) -> tuple[str, str | None, int, datetime, str | None]:
    if not isinstance(body, dict):
        raise ConsoleError(400, 'body: {"model": NAME, "against": MODEL, "limit": N}')
    model = body.get("model")
    if not isinstance(model, str) or model not in models:
        raise ConsoleError(400, f"model: one of {', '.join(models) or 'none configured'}", "model")
    against = body.get("against") or None
    if against is not None and against != RECORDED and against not in models:
        raise ConsoleError(400, f"against: {RECORDED} or a model of models:", "against")
    limit = body.get("limit", DEFAULT_TURNS)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_TURNS:
        raise ConsoleError(400, f"limit: a whole number from 1 to {MAX_TURNS}", "limit")
    since = body.get("since") or "1970-01-01"
    try:
        when = datetime.fromisoformat(str(since))
    except ValueError:
        raise ConsoleError(400, "since: an ISO 8601 date", "since") from None
    persona = body.get("persona") or None
    if persona is not None and not isinstance(persona, str):
        raise ConsoleError(400, "persona: a name of personas:", "persona")
    return model, against, limit, when if when.tzinfo else when.replace(tzinfo=UTC), persona


async def replay_chat(
    console: Any, user: str, address: str, platform: str, chat_id: str, body: Any
) -> dict[str, Any]:
    bot = console._bot
    model, against, limit, since, persona = _options(body, bot.models.names())
    await console.audit(
        user,
        address,
        "replay",
        platform,
        chat_id,
        {"model": model, "against": against or RECORDED, "limit": limit, "persona": persona},
    )
    try:
        found: dict[str, Any] = await replay(
            bot,
            bot.models.named_exactly,
            chats=exact_glob(f"{platform}:{chat_id}"),
            since=since,
            model=model,
            against=against,
            limit=limit,
            persona=persona,
        )
    except ReplayError as exc:
        raise ConsoleError(400, str(exc)) from None
    return found
