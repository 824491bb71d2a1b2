"""Each built-in's on/off state: the status rows check_system.py shows, and switching each off."""

from __future__ import annotations

from chatfn.runtime.plugins import builtin_status
from chatfn.runtime.settings import parse_settings
from function_calls.builtins.reminders import ReminderService
from function_calls.builtins.web_search import WebSearchClient
from tests.function_calls.builtins.conftest import MakeBot


def test_status_rows() -> None:
    rows = {r[0]: r[1:] for r in builtin_status(parse_settings({}))}
    assert rows["reminders"][0] == "on" and rows["summary"][0] == "on"
    assert rows["welcome"][0] == "on" and rows["web_search"][0] == "missing key"
    assert rows["help"] == ("on", "always available")
    rows = {
        r[0]: r[1:]
        for r in builtin_status(
            parse_settings(
                {
                    "reminders": {"enabled": False},
                    "web_search": {"api_key": "k" * 8},
                    "function_calls": {"disabled": ["summary"]},
                }
            )
        )
    }
    assert rows["reminders"] == ("off", "reminders.enabled is false")
    assert (
        rows["web_search"][0] == "on"
        and "sonar at https://api.perplexity.ai" in rows["web_search"][1]
    )
    assert rows["summary"] == ("off", "listed in function_calls.disabled")


async def test_each_builtin_switches_off(make_bot: MakeBot) -> None:
    cfg = {
        "reminders": {"enabled": False},
        "summary": {"enabled": False},
        "web_search": {"enabled": False, "api_key": "k" * 8},
        "welcome": {"enabled": False},
        "chat_admin": {"enabled": False},
        "knowledge": {"enabled": False},
        "why": {"enabled": False},
        "approvals": {"enabled": False},
    }
    tb, _ = await make_bot(config=cfg)
    assert [s.name for s in tb.bot.registry.all()] == ["help"]
    assert tb.bot.service(ReminderService) is None and tb.bot.service(WebSearchClient) is None
