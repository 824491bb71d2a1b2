"""The functions as a service to programs (chatfn/runtime/exposure.py): what an MCP client's calls
leave on record, in process (the SDK over stdio and HTTP is
tests/channels/mcp/test_mcp_channel.py)."""

from __future__ import annotations

from pathlib import Path

from chatfn.testing import TestBot

CONFIG = {
    "function_calls": {"disabled": ["reminder_delete"]},
    "mcp": {
        "expose": {
            "as_user": "desk",
            "chat_id": "desk-chat",
            "functions": {"exclude": ["reminder_*"]},
        }
    },
}


async def test_every_refused_mcp_call_is_audited(tmp_path: Path) -> None:
    """Excluded by `mcp.expose` (reminder_list), disabled and excluded (reminder_delete),
    unknown (nope): each leaves an audit row; the client hears "unknown" for the hidden ones."""
    tb = TestBot(tmp_path, config=CONFIG)
    await tb.start()
    try:
        bot = tb.bot
        caller = bot.exposure.caller()
        hidden = await bot.exposure.call_function(caller, "reminder_list", {})
        both = await bot.exposure.call_function(caller, "reminder_delete", {"id": 3})
        unknown = await bot.exposure.call_function(caller, "nope", {"x": 1})
        rows = [
            (r.function, r.source, r.outcome, r.chat_id, r.sender_id, r.arguments)
            for r in bot.storage.tool_calls()
        ]
    finally:
        await tb.aclose()
    assert hidden["texts"] == ["Unknown function 'reminder_list'."]  # existence not revealed
    assert not hidden["ok"] and not both["ok"] and not unknown["ok"]
    assert rows == [
        ("reminder_list", "mcp", "refused", "desk-chat", "desk", "{}"),
        ("reminder_delete", "mcp", "refused", "desk-chat", "desk", '{"id": 3}'),
        ("nope", "mcp", "unknown", "desk-chat", "desk", '{"x": 1}'),
    ]
    details = [r.detail for r in bot.storage.tool_calls()[:2]]
    assert all("mcp.expose" in d for d in details)
