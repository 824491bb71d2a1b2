"""Resolving a chat's settings from `chats:` rules, `bot:` and overrides; config mistakes stop
the bot naming the key path; the old keys still work, with a warning naming the new one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru import logger

from chatfn.common.config import ConfigError
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.settings import parse_settings
from chatfn.storage.chat_state import Override
from chatfn.testing import TestBot
from function_calls.chat_settings import resolve
from providers.scripted import ScriptedModel

RULES = {
    "personas": {"helper": "Be brief.", "poet": "Rhyme."},
    "bot": {"persona": "poet", "history_size": 10},
    "chats": [
        {"match": {"platform": "onebot", "chat_id": "group:1*"}, "history_size": 40},
        {"match": {"is_group": True}, "persona": "helper", "reply_with_quote": True},
        {"match": {"platform": "onebot"}, "functions": {"disabled": ["help"]}},
    ],
}


def _msg(chat_id: str, *, platform: str = "onebot", group: bool = True) -> IncomingMessage:
    return IncomingMessage(platform, chat_id, "u1", "hi", is_group=group)


def test_first_matching_rule_per_setting_then_bot() -> None:
    settings = parse_settings(RULES)
    chat = resolve(settings, _msg("group:123"), default_model="m")
    assert (chat.history_size, chat.sources["history_size"]) == (40, "chats[0]")
    assert (chat.persona, chat.system_prompt, chat.sources["persona"]) == (
        "helper",
        "Be brief.",
        "chats[1]",
    )
    assert chat.reply_with_quote and chat.reply_with_mention
    assert chat.sources["reply_with_mention"] == "default"
    assert not chat.function_allowed("help") and chat.sources["functions"] == "chats[2]"
    assert (chat.model, chat.sources["model"]) == ("m", "default")
    other = resolve(settings, _msg("private:9", platform="http", group=False))
    assert (other.history_size, other.sources["history_size"]) == (10, "bot.history_size")
    assert (other.persona, other.sources["persona"]) == ("poet", "bot.persona")
    assert other.function_allowed("help") and not other.reply_with_quote


def test_overrides_beat_rules_and_name_who_set_them() -> None:
    settings = parse_settings(RULES)
    at = datetime(2030, 1, 1, 9, 30, tzinfo=UTC)
    overrides = {"model": Override("cheap", "alice", at), "persona": Override("Shout.", "bob", at)}
    chat = resolve(settings, _msg("group:5"), overrides, default_model="m")
    assert chat.model == "cheap"
    assert chat.sources["model"] == "override by alice at 2030-01-01 09:30 UTC"
    assert (chat.persona, chat.system_prompt) == (None, "Shout.")


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ({"model": "deepseek"}, "chats[0].model: no model named 'deepseek' under models"),
        ({"persona": "nobody"}, "chats[0].persona: no persona named 'nobody' under personas"),
        ({"functions": {"disabled": ["nope"]}}, "chats[0].functions.disabled: no function"),
    ],
)
def test_a_rule_naming_something_missing_stops_the_bot(
    tmp_path: Path, rule: dict[str, object], error: str
) -> None:
    config = {"chats": [{"match": {"is_group": True}, **rule}]}
    with pytest.raises(ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
        TestBot(tmp_path, model=ScriptedModel(), config=config)


def test_a_disabled_function_of_a_plugin_that_is_off_is_not_an_error(tmp_path: Path) -> None:
    config = {"chats": [{"match": {"is_group": True}, "functions": {"disabled": ["web_search"]}}]}
    TestBot(tmp_path, model=ScriptedModel(), config=config)  # web_search has no key here


def test_persona_and_system_prompt_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="chats.0"):
        parse_settings({"personas": {"p": "x"}, "chats": [{"persona": "p", "system_prompt": "y"}]})


def test_old_keys_still_read_with_a_warning_naming_the_new_one() -> None:
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        settings = parse_settings(
            {
                "function_calls": {"chats": {"group:1": {"disabled": ["help"]}}},
                "channels": {"onebot": {"quote_replies": True}},
            }
        )
    finally:
        logger.remove(sink)
    assert any("function_calls.chats is deprecated: use chats:" in line for line in lines)
    assert any("use bot.reply_with_quote" in line for line in lines)
    chat = resolve(settings, _msg("group:1"))
    assert not chat.function_allowed("help") and chat.reply_with_quote
    assert resolve(settings, _msg("group:2")).function_allowed("help")


LANGUAGE_RULES = {
    "bot": {"admins": ["root"], "language": "en"},
    "chats": [
        {"match": {"platform": "console", "chat_id": "group:cn*"}, "language": "zh"},
        {"match": {"chat_id": "group:cn-en"}, "history_size": 3, "language": "en"},
    ],
}


def test_language_comes_from_the_first_rule_naming_it() -> None:
    from chatfn.common.i18n import language_of

    settings = parse_settings(LANGUAGE_RULES)
    chat = resolve(settings, _msg("group:cn1", platform="console"))
    assert (chat.language, chat.sources["language"]) == ("zh", "chats[0]")
    # the first matching rule that names a language decides, even when a later one also does
    assert resolve(settings, _msg("group:cn-en", platform="console")).language == "zh"
    other = resolve(settings, _msg("group:uk", platform="console"))
    assert (other.language, other.sources["language"]) == ("en", "bot.language")
    # the same answer where only the chat is known (reminders, welcomes): is_group from the id
    assert language_of(settings, "console", "group:cn1") == "zh"
    assert language_of(settings, "onebot", "group:cn1") == "en"


def test_a_bad_language_in_a_rule_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"chats\.0\.language"):
        parse_settings({"chats": [{"match": {}, "language": "fr"}]})


async def test_replies_and_settings_follow_the_chat_language(tmp_path: Path) -> None:
    rules = {**LANGUAGE_RULES, "chats": [{"match": {"chat_id": "group:cn*"}, "language": "zh"}]}
    tb = TestBot(tmp_path, config=rules)
    try:
        zh = await tb.send("/nope", group="group:cn1")
        assert zh == ["未知命令 /nope。发送 /help 查看可用的命令。"]
        en = await tb.send("/nope", group="group:uk")
        assert en[0].startswith("Unknown command /nope.")
        shown = "\n".join(await tb.send("/settings", group="group:cn1", sender="root"))
        assert "• language: zh (chats[0])" in shown
        shown = "\n".join(await tb.send("/settings", group="group:uk", sender="root"))
        assert "• language: en (bot.language)" in shown
    finally:
        await tb.aclose()


FUNCTION_RULES = {
    "bot": {"admins": ["root"]},
    "chats": [
        {"match": {"chat_id": "group:quiet*"}, "functions": {"disabled": ["*"]}},
        {"match": {"chat_id": "group:*"}, "functions": {"enabled": [], "disabled": ["summary"]}},
        {"match": {"platform": "http"}, "functions": {"enabled": ["reminder_*", "help"]}},
    ],
}


async def test_empty_enabled_is_no_allow_list_and_patterns_match(tmp_path: Path) -> None:
    """README's `functions: {enabled: [], disabled: [web_search]}`: every function but the
    disabled one; `disabled: ["*"]` turns all off, and that rule is logged at start."""
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        tb = TestBot(tmp_path, config=FUNCTION_RULES)
    finally:
        logger.remove(sink)
    try:
        group = resolve(tb.settings, _msg("group:1", platform="console"))
        assert group.function_allowed("help") and group.function_allowed("roll_dice")
        assert not group.function_allowed("summary")
        assert "• /help" in (await tb.send("/help", group="group:1"))[0]
        http = resolve(tb.settings, _msg("private:a", platform="http", group=False))
        assert http.function_allowed("reminder_set") and http.function_allowed("help")
        assert not http.function_allowed("roll_dice")
        quiet = resolve(tb.settings, _msg("group:quiet1", platform="console"))
        assert not any(quiet.function_allowed(n) for n in ("help", "roll_dice", "settings"))
        assert "disabled in this chat" in (await tb.send("/help", group="group:quiet1"))[0]
    finally:
        await tb.aclose()
    empty = [line for line in lines if "leaves its chats with no functions" in line]
    assert len(empty) == 1
    assert empty[0].startswith("chats[0] (match {chat_id: group:quiet*})")


def test_top_level_and_legacy_lists_share_the_semantics(tmp_path: Path) -> None:
    config = {
        "function_calls": {
            "enabled": [],
            "disabled": ["reminder_*"],
            "chats": {
                "group:1": {"enabled": [], "disabled": ["help"]},
                "group:2": {"disabled": ["*"]},
            },
        }
    }
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        tb = TestBot(tmp_path, config=config)
    finally:
        logger.remove(sink)
    chat = resolve(tb.settings, _msg("group:1"))
    assert chat.function_allowed("roll_dice") or chat.function_allowed("settings")
    assert not chat.function_allowed("help") and not chat.function_allowed("reminder_set")
    assert resolve(tb.settings, _msg("group:3")).function_allowed("help")
    assert any(
        line.startswith("function_calls.chats['group:2'] leaves its chats") for line in lines
    )
    with pytest.raises(ConfigError, match=r"function_calls.enabled: no function matches 'x_\*'"):
        TestBot(tmp_path, config={"function_calls": {"enabled": ["x_*"]}})
    lines.clear()
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    try:
        TestBot(tmp_path, config={"function_calls": {"disabled": ["*"]}})
    finally:
        logger.remove(sink)
    assert any("leaves every chat with no functions" in line for line in lines)
