"""What a built-in does, a plugin does through its `Plugin(...)` declaration, and the built-ins
do it only that way: their texts come with the declaration (the core catalogue keeps the
core's), in every language the core speaks, with the placeholders English has."""

from __future__ import annotations

import importlib
import string

import pytest

from chatfn.common.i18n import CORE, LANGUAGES, add_texts, texts_of, translate
from function_calls.plugin import Plugin

BUILTINS = (
    "help",
    "reminders",
    "web_search",
    "summary",
    "welcome",
    "mcp",
    "chat_admin",
    "knowledge",
)


def _plugin(name: str) -> Plugin:  # type: ignore[type-arg]
    module = importlib.import_module(f"function_calls.builtins.{name}")
    return module.plugin  # type: ignore[no-any-return]


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_texts_are_complete_and_its_own(name: str) -> None:
    plugin = _plugin(name)
    english = plugin.texts.get("en", {})
    for language in LANGUAGES:
        have = plugin.texts.get(language, {})
        assert set(have) == set(english), f"{name}: {language} differs from English"
        for key, text in have.items():
            assert _fields(text) == _fields(english[key]), (name, key)
            assert translate(language, key, **dict.fromkeys(_fields(text), "x"))
    assert texts_of(name) == set(english)
    assert not set(english) & set(CORE["en"]), "a built-in's text in the core catalogue"


def test_core_catalogue_keeps_only_the_core_texts() -> None:
    for name in BUILTINS:
        _plugin(name)
    owned = set().union(*(texts_of(n) for n in BUILTINS))
    assert len(owned) >= 130
    builtin_words = ("help.", "reminder.", "time.", "summary.", "web_search.", "kb.", "admin.")
    assert [k for k in CORE["en"] if k.startswith(builtin_words)] == []


def test_a_plugin_cannot_take_another_ones_key_or_lack_english() -> None:
    with pytest.raises(ValueError, match="already the core's"):
        add_texts("thief", {"en": {"core.outage": "mine"}})
    _plugin("welcome")
    with pytest.raises(ValueError, match="already welcome's"):
        Plugin("thief", texts={"en": {"welcome.default": "mine"}})
    with pytest.raises(ValueError, match="keys English lacks"):
        Plugin("half", texts={"en": {}, "zh": {"half.only_zh": "只有中文"}})
    add_texts("doors_fixture", {"en": {"doors.hi": "Hi {who}"}, "zh": {"doors.hi": "你好 {who}"}})
    assert translate("zh", "doors.hi", who="x") == "你好 x"
    assert translate("fr", "doors.hi", who="x") == "Hi x"  # a language nobody speaks: English
