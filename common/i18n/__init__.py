"""The bot's own words, in each language it speaks: one catalogue per language.

Every string the framework or a built-in says to people (replies, refusals, notices, `/help`,
reminder texts, the web page's labels) is a key here, so a translation is a data change and a
test can prove that no language lacks a key. What the model reads as instructions stays in the
prompts; the model is told to answer in the user's language anyway.

`language_of` is the one place a chat's language is decided, so per-chat rules (the `chats:`
section) can later change it without touching any caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from common.i18n import en, zh

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
CATALOGUES: dict[str, Mapping[str, str]] = {"en": en.MESSAGES, "zh": zh.MESSAGES}


class _HasBot(Protocol):
    @property
    def bot(self) -> Any: ...


def language_of(config: _HasBot, platform: str = "", chat_id: str = "") -> Language:
    """The language the bot speaks in a chat. Today `bot.language`; the chat is passed so a
    per-chat rule can decide it later without changing any caller."""
    return getattr(config.bot, "language", "en") or "en"


def translate(language: str, key: str, /, **fmt: Any) -> str:
    """The catalogue text of `key` in `language`, formatted with `fmt`. An unknown language
    falls back to English; an unknown key raises KeyError (a bug the completeness test and the
    built-ins' tests catch, never a user-visible key name)."""
    catalogue = CATALOGUES.get(language, en.MESSAGES)
    text = catalogue[key] if key in catalogue else en.MESSAGES[key]
    return text.format(**fmt) if fmt else text


def catalogue(language: str, prefix: str = "") -> dict[str, str]:
    """The keys (starting with `prefix`) of one language, for clients such as the web page."""
    source = CATALOGUES.get(language, en.MESSAGES)
    return {k: v for k, v in source.items() if k.startswith(prefix)}


WEEKDAY_NAMES: dict[str, tuple[str, ...]] = {
    "en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"),
    "zh": ("周一", "周二", "周三", "周四", "周五", "周六", "周日"),
}
