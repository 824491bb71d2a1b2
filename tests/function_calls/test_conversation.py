"""What a model is sent: a stable prefix (static system prompt, history cut in blocks), the turn's
time and speaker last, and a history bounded by tokens at user-turn boundaries."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from chatfn.storage.db import StoredMessage
from chatfn.testing import ScriptedModel, TestBot, say
from function_calls.conversation import (
    block_window,
    cache_key,
    estimate_tokens,
    fit_tokens,
)
from providers.types import ModelCapabilities

T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def rows(n: int, *, size: int = 1, first_id: int = 1) -> list[StoredMessage]:
    """Alternating user / assistant rows, `size` characters each (beyond their label)."""
    when = datetime(2027, 1, 1, tzinfo=UTC)
    return [
        StoredMessage(
            first_id + i,
            "user" if i % 2 == 0 else "assistant",
            "u",
            "U",
            f"m{first_id + i}" + "x" * size,
            when,
            False,
        )
        for i in range(n)
    ]


# ----------------------------------------------------------------------- count window, blocks


def test_block_window_keeps_at_least_half_and_moves_in_blocks() -> None:
    limit = 20
    starts = []
    for total in range(1, 80):
        chat = rows(total)
        window = block_window(chat[-limit:], total, limit)
        assert limit // 2 < len(window) <= limit or total <= limit // 2
        assert window == chat[len(chat) - len(window) :]  # always the newest rows
        starts.append(window[0].id)
    # The window's first row changes only every limit // 2 messages, not on every message.
    changes = sum(1 for a, b in zip(starts, starts[1:], strict=False) if a != b)
    assert changes == (79 - limit - 1) // (limit // 2) + 1


# ---------------------------------------------------------------------- token budget, turns


def test_fit_tokens_cuts_at_user_turns_and_keeps_the_newest() -> None:
    chat = rows(20, size=300)  # ~100 tokens a row
    per_row = estimate_tokens("m1" + "x" * 300)
    budget = per_row * 7  # room for 7 rows, not 8
    kept = fit_tokens(chat, 0, budget, step=4)
    assert kept and kept[0].role == "user"  # never opens on the bot's reply
    assert kept == chat[len(chat) - len(kept) :]
    assert sum(estimate_tokens(r.text) for r in kept) <= budget
    assert len(kept) >= 4


def test_fit_tokens_cut_is_stable_while_the_chat_grows() -> None:
    per_row = estimate_tokens("m1" + "x" * 300)
    budget = per_row * 12
    firsts = []
    for total in range(14, 40, 2):  # one user turn and its answer per request
        chat = rows(total, size=300)
        firsts.append(fit_tokens(chat, 0, budget, step=5)[0].id)
    changes = sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b)
    # A slide by one turn per request would change it 12 times.
    assert changes <= 6


async def test_history_is_never_sent_over_budget_and_a_huge_message_is_truncated(
    tmp_path: Path,
) -> None:
    caps = ModelCapabilities(streaming=False, context_tokens=1500)
    model = ScriptedModel([say("ok")] * 3, capabilities=caps)
    # Without compaction (test_compaction.py): what does not fit is left out.
    config = {"bot": {"compaction": False}}
    tb = TestBot(tmp_path, model=model, builtins=False, clock=lambda: T0, config=config)
    await tb.send("first " + "a" * 900)
    await tb.send("second " + "b" * 900)
    await tb.send("third " + "c" * 9000)  # alone larger than the whole budget
    await tb.aclose()
    second = model.requests[1].messages
    # 1500 - 1024 answer room: the first turn does not fit with the second; cut at a user turn.
    assert [m.role for m in second] == ["system", "user"]
    last = model.requests[2].messages
    assert [m.role for m in last] == ["system", "user"]
    assert "[truncated:" in (last[-1].content or "") and len(last[-1].content or "") < 2000


# ------------------------------------------------------------------------- request layout


async def test_layout_static_system_first_time_and_speaker_last(tmp_path: Path) -> None:
    now = [T0]
    model = ScriptedModel([say(f"answer {i}") for i in range(6)])
    tb = TestBot(tmp_path, model=model, builtins=False, clock=lambda: now[0])
    for i in range(6):
        await tb.send(f"question {i}", group="g", sender="bob", at_bot=True)
        now[0] += 170  # minutes pass between turns
    systems = {r.messages[0].content for r in model.requests}
    assert len(systems) == 1  # the same bytes every request: no time, no speaker
    (system,) = systems
    assert "Current time" not in system and "bob" not in system
    for request in model.requests:
        newest = request.messages[-1].content or ""
        note, _, words = newest.partition("\n")
        assert words.startswith("bob: question")
        assert note.startswith("<context>Current time: 2027-01-15")
        assert note.endswith("From: bob.</context>")
        # Older turns carry no note: they are the same bytes in every later request.
        assert all("Current time" not in (m.content or "") for m in request.messages[1:-1])
    # Each request starts with everything the previous one sent, up to its newest message.
    for before, after in zip(model.requests, model.requests[1:], strict=False):
        assert after.messages[: len(before.messages) - 1] == before.messages[:-1]
    await tb.aclose()


def test_cache_key_names_the_chat_not_its_id() -> None:
    class Ctx:
        class message:  # noqa: N801 - a stand-in for IncomingMessage
            platform, chat_id = "onebot", "group:123"

    key = cache_key(Ctx())  # type: ignore[arg-type]
    assert key.startswith("chat-") and "123" not in key and len(key) <= 64
