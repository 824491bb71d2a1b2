"""Audit rows store what came, cut with a marker, and never fail (chatfn/storage/fit.py): on SQLite,
which ignores column widths, and on the machine's real PostgreSQL, which enforces them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chatfn.storage.db import Storage
from chatfn.testing import TestBot
from tests.cluster.conftest import pg_url  # noqa: F401 (the fixture)

UNKNOWN = "f" * 200  # an unknown function name over the 64-character column


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}"
    return request.getfixturevalue("pg_url")


async def test_an_unknown_function_name_over_the_column_keeps_its_audit_row(
    url: str, tmp_path: Path
) -> None:
    tb = TestBot(tmp_path, config={"storage": {"url": url}})
    try:
        done = await tb.bot.exposure.call_function(
            tb.bot.exposure.caller(), UNKNOWN, {"q": "x" * 9000}
        )
        [row] = tb.bot.storage.tool_calls()
    finally:
        await tb.aclose()
    assert done["outcome"] == "unknown"
    assert row.outcome == "unknown"
    assert len(row.function) <= 64
    assert row.function == "f" * 57 + "…[+143]"  # 143 of the 200 characters cut
    assert len(row.arguments) <= 8000 and row.arguments.endswith("]")
    assert row.arguments.startswith('{"q": "xxx')


def test_every_audited_string_column_is_cut_and_made_storable(url: str) -> None:
    storage = Storage(url)
    storage.create_tables()
    try:
        long = {
            "platform": "p" * 40,
            "chat_id": "c" * 300,
            "sender_id": "s" * 300,
            "message_id": "m" * 300,
            "function": "bad\x00name\ud800" + "n" * 100,
            "source": "s" * 40,
            "outcome": "o" * 40,
        }
        storage.add_tool_call(
            **long, arguments={"a": "\x00" + "x" * 20000}, detail="d" * 5000, duration_ms=1.0
        )
        storage.chat_state.add_usage_rows(
            [
                {
                    "platform": "p",
                    "chat_id": "c",
                    "sender_id": "u",
                    "model_name": "m" * 100,
                    "model_id": "i" * 500,
                    "outcome": "SomeVeryLongProviderErrorClassNameIndeed",
                    "created_at": datetime.now(UTC),
                }
            ]
        )
        [row] = storage.tool_calls()
        [usage] = storage.chat_state.usage_rows()
    finally:
        storage.close()
    widths = {
        "platform": 32,
        "chat_id": 128,
        "sender_id": 128,
        "message_id": 128,
        "function": 64,
        "source": 16,
        "outcome": 16,
    }
    for name, width in widths.items():
        value = getattr(row, name)
        assert len(value) <= width and "…" in value, (name, value)
        assert value[0] == long[name][0]
    assert row.function.startswith("bad\ufffdname\ufffdnnn")  # NUL, lone surrogate replaced
    assert len(row.detail) <= 2000 and "…[+" in row.detail
    assert len(row.arguments) <= 8000 and "\x00" not in row.arguments
    assert json.loads(json.dumps(row.arguments))  # stored text, readable
    assert len(usage.model_name) <= 64 and len(usage.model_id) <= 128
    assert usage.outcome.startswith("SomeVeryLong") and len(usage.outcome) <= 32
