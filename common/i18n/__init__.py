"""The bot's own words, in each language it speaks: one catalogue per language.

Every string the framework or a built-in says to people (replies, refusals, notices, `/help`,
reminder texts, the web page's labels) is a key here, so a translation is a data change and a
test can prove that no language lacks a key. What the model reads as instructions stays in the
prompts; the model is told to answer in the user's language anyway.

`language_of` is the one place a chat's language is decided: the first `chats:` rule that
matches the chat and names a `language`, else `bot.language`.
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


def language_of(
    config: _HasBot, platform: str = "", chat_id: str = "", is_group: bool | None = None
) -> Language:
    """The language the bot speaks in a chat: the first `chats:` rule matching it that names a
    `language`, else `bot.language`. `is_group` None (a reminder row, an event): read from the
    chat id's `group:` prefix, which every channel uses."""
    group = chat_id.startswith("group:") if is_group is None else is_group
    for rule in getattr(config, "chats", None) or ():
        if rule.language is not None and rule.match.fits(platform, chat_id, group):
            return rule.language
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
