"""The bot's own words, in each language it speaks: one catalogue per language.

Every string the framework or a plugin says to people (replies, refusals, notices, `/help`,
reminder texts, the web page's labels) is a key of the catalogue, so a translation is a data
change and a test can prove that no language lacks a key. The core's texts are `en.py` and
`zh.py`; a plugin's (built-ins included) come with its declaration, `Plugin(texts=...)`, and
are merged in by `add_texts` when the plugin is declared. What the model reads as
instructions stays in the prompts; the model is told to answer in the user's language anyway.

`language_of` is the one place a chat's language is decided: the first `chats:` rule that
matches the chat and names a `language`, else `bot.language`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from chatfn.common.i18n import en, zh

if TYPE_CHECKING:
    from chatfn.common.config import CoreSettings

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
#: The core's own texts, per language.
CORE: dict[str, Mapping[str, str]] = {"en": en.MESSAGES, "zh": zh.MESSAGES}
#: The catalogue: the core's texts and every declared plugin's (`add_texts`).
CATALOGUES: dict[str, dict[str, str]] = {lang: dict(texts) for lang, texts in CORE.items()}
#: Which plugin gave each key that is not the core's.
_OWNERS: dict[str, str] = {}


def add_texts(owner: str, texts: Mapping[str, Mapping[str, str]]) -> None:
    """Merge a plugin's texts (`{"en": {key: text}, "zh": {...}}`) into the catalogue. English
    is the reference: a key another language has must be in English. A key the core or another
    plugin already gave is refused naming both (the same plugin declared again replaces its
    own)."""
    english = texts.get("en", {})
    for language, found in texts.items():
        extra = sorted(set(found) - set(english))
        if extra:
            raise ValueError(f"plugin {owner}: texts[{language!r}] has keys English lacks: {extra}")
    for found in texts.values():
        for key in found:
            other = "the core" if key in CORE["en"] else _OWNERS.get(key, owner)
            if other != owner:
                raise ValueError(f"plugin {owner}: text key {key!r} is already {other}'s")
    for language, found in texts.items():
        CATALOGUES.setdefault(language, {}).update(found)
        for key in found:
            _OWNERS[key] = owner


def texts_of(owner: str) -> set[str]:
    """The keys a plugin gave (tests and `chatfn check`)."""
    return {k for k, o in _OWNERS.items() if o == owner}


def language_of(
    config: CoreSettings, platform: str = "", chat_id: str = "", is_group: bool | None = None
) -> Language:
    """The language the bot speaks in a chat: the first `chats:` rule matching it that names a
    `language`, else `bot.language`. `is_group` None (a reminder row, an event): read from the
    chat id's `group:` prefix, which every channel uses."""
    group = chat_id.startswith("group:") if is_group is None else is_group
    for rule in config.chats:
        if rule.language is not None and rule.match.fits(platform, chat_id, group):
            return rule.language
    return config.bot.language


def translate(language: str, key: str, /, **fmt: Any) -> str:
    """The catalogue text of `key` in `language`, formatted with `fmt`. An unknown language
    falls back to English; an unknown key raises KeyError (a bug the completeness test and the
    built-ins' tests catch, never a user-visible key name)."""
    catalogue = CATALOGUES.get(language, CATALOGUES["en"])
    text = catalogue[key] if key in catalogue else CATALOGUES["en"][key]
    return text.format(**fmt) if fmt else text


def catalogue(language: str, prefix: str = "") -> dict[str, str]:
    """The keys (starting with `prefix`) of one language, for clients such as the web page."""
    source = CATALOGUES.get(language, CATALOGUES["en"])
    return {k: v for k, v in source.items() if k.startswith(prefix)}


# Words for a length of time and its seconds. One table, because a reminder's `in 2 weeks` and a
# summary's `last 2 weeks` are the same words to the user and must not drift apart.
UNIT_SECONDS: dict[str, dict[str, int]] = {
    "en": {
        "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
        "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
        "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
        "d": 86400, "day": 86400, "days": 86400,
        "w": 604800, "week": 604800, "weeks": 604800,
    },
    "zh": {
        "秒": 1, "秒钟": 1, "分": 60, "分钟": 60, "小时": 3600, "钟头": 3600,
        "天": 86400, "日": 86400, "周": 604800, "星期": 604800, "礼拜": 604800,
    },
}  # fmt: skip

WEEKDAY_NAMES: dict[str, tuple[str, ...]] = {
    "en": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"),
    "zh": ("周一", "周二", "周三", "周四", "周五", "周六", "周日"),
}
